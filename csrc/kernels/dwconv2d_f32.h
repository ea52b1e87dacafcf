// Depthwise 2-D convolution, NHWC float32 (the kernel is in dwconv2d_f32.cc): its argument
// block and weight layout, shared with kernels that run it on rows they produced themselves.
#pragma once
#include <cstdint>

namespace msv0 {

constexpr int64_t kDwPad = 16;  // the widest VecF

struct DwArgs {
  const float* x;       // n x h x w x c
  float* y;             // n x oh x ow x c
  const float* weight;  // kh*kw x cp
  const float* bias;    // cp (zeros when the node has none)
  const float* zeros;   // at least w*c zeros: stands in for input rows outside the image
  int64_t n, h, w, c, oh, ow, cp;
  int64_t kh, kw, sh, sw, dh, dw, pt, pl;
  float lo, hi;
};

// Output rows [r0, r1) of the flattened (b, oy) range.
using DwConvFn = void (*)(const DwArgs&, int64_t r0, int64_t r1);

}  // namespace msv0

#if !MSV0_ONCE
namespace msv0 {
namespace MSV0_ISA {
void dwconv2d_f32(const DwArgs& a, int64_t r0, int64_t r1);
}  // namespace MSV0_ISA
}  // namespace msv0
#else
namespace msv0 {
// Packs weight [c, kh*kw] into taps x cp (cp = c rounded up to kDwPad, zero-padded) and bias
// (c floats, or null for zeros) into cp floats.
void dw_pack(const float* weight, const float* bias, int64_t c, int64_t taps, float* w_out, float* b_out);
}  // namespace msv0
#endif
