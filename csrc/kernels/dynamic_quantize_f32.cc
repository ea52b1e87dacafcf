// ONNX's DynamicQuantizeLinear as the converter lowers it (convert/onnx_dynq.py) to nineteen
// float32 steps, run as two passes over x (msv0.dynamic_quant fuses the steps at plan time):
//   lo = min(min x, 0), hi = max(max x, 0), scale = (hi − lo) / 255, or 1 where that is 0,
//   zp = rne(clamp(0 − lo / scale, 0, 255)), codes = clamp(rne(x / scale) + zp, 0, 255),
// rne(v) = (v + 1.5·2^23) − 1.5·2^23 and clamp as HARD_TANH's: each operation the steps' own
// float32 one, in their order, so the results are theirs bit for bit (contraction is off).
#include "simd/pragmas.h"
MSV0_FP_CONTRACT_OFF
#include "kernels/kernel.h"

namespace msv0 {

struct DynQuantArgs {
  const float* x;
  float* codes;
  float scale, zp;
};

// With minmax: min and max of x[e0, e1) and 0 into minmax[0], minmax[1]; else codes[e0, e1).
using DynQuantFn = void (*)(const DynQuantArgs&, int64_t e0, int64_t e1, float* minmax);
MSV0_DECLARE(dynamic_quantize_f32, DynQuantFn)

constexpr float kRoundMagic = 12582912.0f;  // 1.5·2^23

}  // namespace msv0

#if !MSV0_ONCE
namespace msv0 {
namespace MSV0_ISA {

void dynamic_quantize_f32(const DynQuantArgs& a, int64_t e0, int64_t e1, float* minmax) {
  constexpr int64_t kL = VecF::kLanes;
  if (minmax) {
    // A tail loads zeros, which the 0 in min(x, 0) and max(x, 0) already counts.
    VecF lo = VecF::zero(), hi = VecF::zero();
    int64_t i = e0;
    for (; i + kL <= e1; i += kL) {
      const VecF v = VecF::load(a.x + i);
      lo = min(lo, v), hi = max(hi, v);
    }
    if (i < e1) {
      const VecF v = VecF::load_tail(a.x + i, e1 - i);
      lo = min(lo, v), hi = max(hi, v);
    }
    float l[kL], h[kL];
    lo.store(l), hi.store(h);
    minmax[0] = minmax[1] = 0.f;
    for (int64_t j = 0; j < kL; ++j) {
      minmax[0] = l[j] < minmax[0] ? l[j] : minmax[0];
      minmax[1] = h[j] > minmax[1] ? h[j] : minmax[1];
    }
    return;
  }
  const VecF scale = VecF::splat(a.scale), zp = VecF::splat(a.zp), magic = VecF::splat(kRoundMagic);
  const VecF lo = VecF::zero(), hi = VecF::splat(255.f);
  const auto code = [&](VecF v) { return clamp((v / scale + magic - magic) + zp, lo, hi); };
  int64_t i = e0;
  for (; i + kL <= e1; i += kL) code(VecF::load(a.x + i)).store(a.codes + i);
  if (i < e1) code(VecF::load_tail(a.x + i, e1 - i)).store_tail(a.codes + i, e1 - i);
}

MSV0_EXPORT(dynamic_quantize_f32)
}  // namespace MSV0_ISA
}  // namespace msv0

#else  // binding pass
#include <algorithm>
#include <vector>
#include <pybind11/stl.h>

#include "runtime/native.h"

namespace msv0 {
namespace {

class DynamicQuantize : public NativeOp {
 public:
  DynamicQuantize(const std::vector<int64_t>& x_shape, const std::vector<int64_t>& scale_shape,
                  const std::vector<int64_t>& zp_shape)
      : fn_(MSV0_DISPATCH(dynamic_quantize_f32)), size_(elements(checked_shape(x_shape, x_shape.size(), "x_shape"))) {
    for (const auto* s : {&scale_shape, &zp_shape})
      if (elements(checked_shape(*s, s->size(), "scale_shape / zp_shape")) != 1)
        throw ArgError("scale_shape and zp_shape: expected one value each");
    set_operands({{x_shape, 'f'}}, {{scale_shape, 'f'}, {zp_shape, 'f'}, {x_shape, 'f'}});
  }

  void run(const void* const* in, void* const* out) const override {
    DynQuantArgs a{static_cast<const float*>(in[0]), static_cast<float*>(out[2]), 0.f, 0.f};
    // Each chunk's min and max, then theirs.
    constexpr int64_t kChunk = 16384;
    const int64_t chunks = std::max<int64_t>((size_ + kChunk - 1) / kChunk, 1);
    std::vector<float> minmax(static_cast<size_t>(2 * chunks), 0.f);
    parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) fn_(a, c * kChunk, std::min(size_, (c + 1) * kChunk), &minmax[2 * c]);
    });
    float lo = 0.f, hi = 0.f;  // min(min x, 0) and max(max x, 0): the steps' Minimum and Maximum
    for (int64_t c = 0; c < chunks; ++c) lo = std::min(lo, minmax[2 * c]), hi = std::max(hi, minmax[2 * c + 1]);
    float scale = (hi - lo) / 255.f;
    scale = scale + (scale == 0.f ? 1.f : 0.f);
    const float z = 0.f - lo / scale;
    a.scale = scale;
    a.zp = (std::min(255.f, std::max(0.f, z)) + kRoundMagic) - kRoundMagic;
    parallel_for(size_, kChunk, [&](int64_t e0, int64_t e1) { fn_(a, e0, e1, nullptr); });
    *static_cast<float*>(out[0]) = a.scale;
    *static_cast<float*>(out[1]) = a.zp;
  }
  const char* name() const override { return "dynamic_quantize_f32"; }

 private:
  DynQuantFn fn_;
  int64_t size_;
};

}  // namespace

MSV0_BIND(m) {
  py::class_<DynamicQuantize, NativeOp, std::shared_ptr<DynamicQuantize>>(m, "DynamicQuantize",
      "ONNX's DynamicQuantizeLinear as the converter's float32 steps compute it, bit for bit: x (float32) ->\n"
      "scale, zero point and the uint8 codes, all float32 (see dynamic_quantize_f32.cc).")
      .def(py::init<const std::vector<int64_t>&, const std::vector<int64_t>&, const std::vector<int64_t>&>(),
           py::arg("x_shape"), py::arg("scale_shape"), py::arg("zp_shape"));
}

}  // namespace msv0
#endif
