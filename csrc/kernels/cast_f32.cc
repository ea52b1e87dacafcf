// Cast to float32 from bool, uint8 or int32: exact for bool and uint8; int32 rounds to nearest
// even beyond 2^24, as C's conversion (and NumPy's) does. And float32 to int32, r1.1's C cast:
// truncation toward zero, where C leaves values outside int32 undefined; here they saturate and
// NaN gives 0, as r1.1's ARM builds convert (fcvtzs), on every tier. Elements [e0, e1) split over
// threads; each range is one loop the compiler vectorizes for the tier.
#include "kernels/kernel.h"

namespace msv0 {

struct CastArgs {
  const void* x;
  void* y;
  char type;  // the input's NumPy type char: '?' bool, 'B' uint8, 'i' int32 (to float32), 'f' (to int32)
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

void to_int32(const float* x, int32_t* y, int64_t e0, int64_t e1) {
  for (int64_t i = e0; i < e1; ++i) {
    const float v = x[i];  // 2^31 is a float; every float below it truncates into int32
    y[i] = v != v ? 0 : v >= 2147483648.f ? INT32_MAX : v <= -2147483648.f ? INT32_MIN : static_cast<int32_t>(v);
  }
}

}  // namespace

void cast_f32(const CastArgs& g, int64_t e0, int64_t e1) {
  if (g.type == 'f')
    return to_int32(static_cast<const float*>(g.x), static_cast<int32_t*>(g.y), e0, e1);
  float* y = static_cast<float*>(g.y);
  if (g.type == 'i')
    convert<int32_t>(g.x, y, e0, e1);
  else  // bool is one byte holding 0 or 1
    convert<uint8_t>(g.x, y, e0, e1);
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
    if (type != '?' && type != 'B' && type != 'i' && type != 'f')
      throw ArgError(std::string("type must be '?' (bool), 'B' (uint8), 'i' (int32) or 'f' (float32), got '") + type +
                     "'");
    size_ = elements(checked_shape(shape, shape.size(), "shape"));
    type_ = type;
    set_operands({{shape, type}}, {{shape, type == 'f' ? 'i' : 'f'}});
  }

  void run(const void* const* in, void* const* out) const override {
    const CastArgs g{in[0], out[0], type_};
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
      "y = float32(x) for x bool ('?'), uint8 ('B') or int32 ('i'); or, for x float32 ('f'), y = int32(x) truncated,\n"
      "saturating, NaN -> 0; both of exactly `shape`.")
      .def(py::init<char, const std::vector<int64_t>&>(), py::arg("type"), py::arg("shape"));
}

}  // namespace msv0
#endif
