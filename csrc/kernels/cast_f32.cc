// Cast to float32 from bool, uint8 or int32: exact for bool and uint8; int32 rounds to nearest
// even beyond 2^24, as C's conversion (and NumPy's) does. Elements [e0, e1) split over threads;
// each range is one loop the compiler vectorizes for the tier. (Casts from float to int stay in
// NumPy: C leaves out-of-range values undefined.)
#include "kernels/kernel.h"

namespace msv0 {

struct CastArgs {
  const void* x;
  float* y;
  char type;  // the input's NumPy type char: '?' bool, 'B' uint8, 'i' int32
};

using CastFn = void (*)(const CastArgs&, int64_t e0, int64_t e1);
MSV0_DECLARE(cast_f32, CastFn)

}  // namespace msv0

#if !MSV0_ONCE
namespace msv0 {
namespace MSV0_ISA {
namespace {

template <typename T>
void convert(const void* x, float* y, int64_t e0, int64_t e1) {
  const T* p = static_cast<const T*>(x);
  for (int64_t i = e0; i < e1; ++i) y[i] = static_cast<float>(p[i]);
}

}  // namespace

void cast_f32(const CastArgs& g, int64_t e0, int64_t e1) {
  if (g.type == 'i')
    convert<int32_t>(g.x, g.y, e0, e1);
  else  // bool is one byte holding 0 or 1
    convert<uint8_t>(g.x, g.y, e0, e1);
}

MSV0_EXPORT(cast_f32)
}  // namespace MSV0_ISA
}  // namespace msv0

#else  // binding pass
#include <string>
#include <vector>
#include <pybind11/stl.h>

#include "runtime/native.h"

namespace msv0 {
namespace {

class CastF32 : public NativeOp {
 public:
  CastF32(char type, const std::vector<int64_t>& shape) : fn_(MSV0_DISPATCH(cast_f32)) {
    if (type != '?' && type != 'B' && type != 'i')
      throw ArgError(std::string("type must be '?' (bool), 'B' (uint8) or 'i' (int32), got '") + type + "'");
    size_ = elements(checked_shape(shape, shape.size(), "shape"));
    type_ = type;
    set_operands({{shape, type}}, {{shape, 'f'}});
  }

  void run(const void* const* in, void* const* out) const override {
    const CastArgs g{in[0], static_cast<float*>(out[0]), type_};
    parallel_for(size_, 16384, [&](int64_t e0, int64_t e1) { fn_(g, e0, e1); });
  }
  const char* name() const override { return "cast_f32"; }

 private:
  CastFn fn_;
  int64_t size_;
  char type_;
};

}  // namespace

MSV0_BIND(m) {
  py::class_<CastF32, NativeOp, std::shared_ptr<CastF32>>(m, "CastF32",
      "y = float32(x) for x bool ('?'), uint8 ('B') or int32 ('i'), both of exactly `shape`.")
      .def(py::init<char, const std::vector<int64_t>&>(), py::arg("type"), py::arg("shape"));
}

}  // namespace msv0
#endif
