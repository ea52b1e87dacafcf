// Depthwise 2-D convolution, NHWC float32 (the kernel is in dwconv2d_f32.cc): its argument
// block and weight layout, shared with kernels that run it on rows they produced themselves.
#pragma once
#include <cstdint>

namespace msv0 {

struct DwArgs {
  const float* x;       // n x h x w x c
  float* y;             // n x oh x ow x c
  const float* weight;  // kh*kw x cp, cp = c rounded up to the tier's DwConvConfig::cr
  const float* bias;    // cp (zeros when the node has none)
  const float* zeros;   // at least w*c zeros: stands in for input rows outside the image
  int64_t n, h, w, c, oh, ow, cp;
  int64_t kh, kw, sh, sw, dh, dw, pt, pl;
  float lo, hi;
};

// Output rows [r0, r1) of the flattened (b, oy) range.
using DwConvFn = void (*)(const DwArgs&, int64_t r0, int64_t r1);

// A tier's depthwise slot: the kernel and the channel tile it reads weights and bias in whole
// vectors of (its lane count), which packing pads channels to.
struct DwConvConfig {
  DwConvFn fn;
  int64_t cr;
};

}  // namespace msv0

#if !MSV0_ONCE
namespace msv0 {
namespace MSV0_ISA {
void dwconv2d_f32(const DwArgs& a, int64_t r0, int64_t r1);
}  // namespace MSV0_ISA
}  // namespace msv0
#else
#include <vector>

#include "runtime/weight_memory.h"
namespace msv0 {
// The active tier's depthwise slot.
const DwConvConfig& dwconv_config();

// Depthwise weights packed for the tier active at packing: taps x cp and cp bias floats, cp =
// c rounded up to that tier's cr, zero-padded.
struct DwPacked {
  int64_t cp = 0;
  WeightVector<float> w, bias;
};
// weight [c, taps]; bias c floats, or null for zeros.
DwPacked dw_pack(const float* weight, const float* bias, int64_t c, int64_t taps);
}  // namespace msv0
#endif
