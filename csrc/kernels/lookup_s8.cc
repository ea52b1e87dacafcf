// int8 -> int8 through a 256-entry table (index q + 128): the int8 Activations, whose r1.1
// arithmetic ops/activation_s8.py evaluates once per Session for every input value. One byte
// load per element; no ISA tier of its own.
#include "kernels/kernel.h"

#if MSV0_ONCE
#include <array>
#include <vector>
#include <pybind11/stl.h>

#include "runtime/native.h"

namespace msv0 {
namespace {

class LookupS8 : public NativeOp {
 public:
  LookupS8(const py::array& table, const std::vector<int64_t>& shape)
      : size_(elements(checked_shape(shape, shape.size(), "shape"))) {
    if (table.ndim() != 1 || table.shape(0) != 256) throw ArgError("table: expected 256 int8 values");
    const int8_t* t = in_ptr<int8_t>(table, "table");
    std::copy(t, t + 256, table_.begin());
    set_operands({{shape, 'b'}}, {{shape, 'b'}});
  }

  void run(const void* const* in, void* const* out) const override {
    const auto* x = static_cast<const uint8_t*>(in[0]);
    auto* y = static_cast<int8_t*>(out[0]);
    parallel_for(size_, 1 << 16, [&](int64_t e0, int64_t e1) {
      for (int64_t e = e0; e < e1; ++e) y[e] = table_[x[e] ^ 0x80];  // (uint8)q ^ 0x80 = q + 128
    });
  }
  const char* name() const override { return "lookup_s8"; }

 private:
  int64_t size_;
  std::array<int8_t, 256> table_{};
};

}  // namespace

MSV0_BIND(m) {
  py::class_<LookupS8, NativeOp, std::shared_ptr<LookupS8>>(
      m, "LookupS8", "y = table[x + 128] for int8 arrays of `shape`; table: 256 int8 values.")
      .def(py::init<const py::array&, const std::vector<int64_t>&>(), py::arg("table"), py::arg("shape"));
}

}  // namespace msv0
#endif
