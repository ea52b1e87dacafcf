// QuantDTypeCast between float32 and int8 (format-v0.md §3), flat arrays, elements [e0, e1)
// per thread, whole vectors then one masked tail.
//   f32 -> i8: q = clamp(round(x·inv_scale + zp), -128, 127), the product rounded to float
//              before the add; round is C round (half away from zero); x = ±inf -> 127 (r1.1
//              tests isinf first); NaN -> 0 (undefined in r1.1: msv0's choice, as its NumPy
//              u8 path does).
//   i8 -> f32: y = float(q − zp) · scale.
// r1.1's reference is the unfused C expression, and the compiler contracts a vector multiply
// followed by an add into an FMA wherever the tier has one (aarch64 always): contraction is off
// for this file.
#include "simd/pragmas.h"
MSV0_FP_CONTRACT_OFF
#include "kernels/quant_cast.h"

namespace msv0 {
MSV0_DECLARE(quant_cast, QuantCastFn)
}  // namespace msv0

#if !MSV0_ONCE
namespace msv0 {
namespace MSV0_ISA {
namespace {

// Every step is exact but the product and the sum, so each tier matches the scalar C formula.
VecI32 quantize(VecF x, VecF inv_scale, VecF zp) {
  const VecF zero = VecF::zero();
  const VecF p = x * inv_scale;
  const VecF v = p + zp;
  // Clamp in float so the conversions below stay in range; max/min return their second operand
  // when unordered, so a NaN v contributes 0 to both halves.
  VecF c = min(max(v, zero), VecF::splat(127.f)) + max(min(v, zero), VecF::splat(-128.f));
  // ±inf -> 127: |x| > FLT_MAX only for ±inf (the comparison is false for NaN, which keeps 0).
  c = select_lt(VecF::splat(3.40282347e38f), max(x, zero - x), VecF::splat(127.f), c);
  // Half away from zero: t = trunc(c); c − t is exact and in (−1, 1), so trunc(2(c − t)) is ±1
  // exactly when the fraction reaches one half.
  const VecI32 t = trunc_i32(c);
  const VecF frac = c - to_f32(t);
  return t + trunc_i32(frac + frac);
}

void quantize_range(const QuantCastArgs& g, int64_t e0, int64_t e1) {
  const float* x = static_cast<const float*>(g.x);
  int8_t* y = static_cast<int8_t*>(g.y);
  const VecF inv = VecF::splat(g.scale), zp = VecF::splat(g.zp_f);
  int64_t i = e0;
  for (; i + VecF::kLanes <= e1; i += VecF::kLanes) quantize(VecF::load(x + i), inv, zp).store_s8(y + i);
  if (i < e1) quantize(VecF::load_tail(x + i, e1 - i), inv, zp).store_s8_tail(y + i, e1 - i);
}

void dequantize_range(const QuantCastArgs& g, int64_t e0, int64_t e1) {
  const int8_t* x = static_cast<const int8_t*>(g.x);
  float* y = static_cast<float*>(g.y);
  const VecF scale = VecF::splat(g.scale);
  const VecI32 zp = VecI32::splat(g.zp);
  int64_t i = e0;
  for (; i + VecI32::kLanes <= e1; i += VecI32::kLanes) (to_f32(VecI32::load_s8(x + i) - zp) * scale).store(y + i);
  if (i < e1) (to_f32(VecI32::load_s8_tail(x + i, e1 - i) - zp) * scale).store_tail(y + i, e1 - i);
}

}  // namespace

void quant_cast(const QuantCastArgs& g, int64_t e0, int64_t e1) {
  if (g.kind == kQuantizeS8)
    quantize_range(g, e0, e1);
  else
    dequantize_range(g, e0, e1);
}

MSV0_EXPORT(quant_cast)
}  // namespace MSV0_ISA
}  // namespace msv0

#else  // binding pass
#include <string>
#include <vector>
#include <pybind11/stl.h>

#include "runtime/native.h"

namespace msv0 {
namespace {

class QuantCast : public NativeOp {
 public:
  QuantCast(int32_t kind, const std::vector<int64_t>& shape, float scale, int64_t zp) : fn_(MSV0_DISPATCH(quant_cast)) {
    if (kind != kQuantizeS8 && kind != kDequantizeS8) throw ArgError("unknown QuantCast kind " + std::to_string(kind));
    if (zp < INT32_MIN || zp > INT32_MAX) throw ArgError("zp out of int32 range");
    const int64_t size = elements(checked_shape(shape, shape.size(), "shape"));
    const int32_t z = static_cast<int32_t>(zp);
    g_ = QuantCastArgs{nullptr, nullptr, size, kind, scale, static_cast<float>(z), z};
    const char in = kind == kQuantizeS8 ? 'f' : 'b', out = kind == kQuantizeS8 ? 'b' : 'f';
    set_operands({{shape, in}}, {{shape, out}});
  }

  void run(const void* const* in, void* const* out) const override {
    QuantCastArgs g = g_;
    g.x = in[0];
    g.y = out[0];
    parallel_for(g.size, 16384, [&](int64_t e0, int64_t e1) { fn_(g, e0, e1); });
  }
  const char* name() const override { return "quant_cast"; }

 private:
  QuantCastFn fn_;
  QuantCastArgs g_;
};

}  // namespace

MSV0_BIND(m) {
  py::class_<QuantCast, NativeOp, std::shared_ptr<QuantCast>>(m, "QuantCast",
      "QuantDTypeCast on arrays of `shape`: kind 0 = float32 -> int8, q = clamp(round(x·scale + zp)) with\n"
      "scale the float reciprocal 1/s (±inf -> 127, NaN -> 0); kind 1 = int8 -> float32, (q - zp)·scale.")
      .def(py::init<int32_t, const std::vector<int64_t>&, float, int64_t>(), py::arg("kind"), py::arg("shape"),
           py::arg("scale"), py::arg("zp"));
}

}  // namespace msv0
#endif
