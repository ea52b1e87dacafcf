// The Conv2D family's kernel objects (binding pass only): one geometry, the selector that
// picks the algorithm for it, the constructors of the algorithms that live in other kernel
// files, and what a fused block borrows from the objects it absorbs.
#pragma once
#if MSV0_ONCE
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/post_op.h"
#include "kernels/dwconv2d_f32.h"
#include "kernels/gemm_f32.h"
#include "runtime/native.h"

namespace msv0 {

// A Conv2D's shapes and attributes: x n x h x w x c, y n x oh x ow x oc, weight [oc, kh, kw,
// c/group], fused activation as the clamp [lo, hi].
struct Conv2dShape {
  int64_t n, h, w, c, oh, ow, oc, group;
  int64_t kh, kw, sh, sw, dh, dw, pt, pl;
  float lo, hi;
};

// kWinograd: F(4x4, 3x3) in fp32; kWinogradF2: F(2x2, 3x3) on the fp32 or bf16 GEMM.
enum class Conv2dAlgorithm { kDepthwise, kDirect, kGemm1x1, kIm2col, kWinograd, kWinogradF2 };
// precision: the kernel object's (a 3x3 conv may leave fp32 Winograd for the bf16 GEMM).
Conv2dAlgorithm conv2d_algorithm(const Conv2dShape& s, Precision precision);
const char* conv2d_algorithm_name(Conv2dAlgorithm a);

// weight as above; bias oc floats, or null.
std::shared_ptr<NativeOp> make_dwconv2d(const Conv2dShape& s, const float* weight, const float* bias);
std::shared_ptr<NativeOp> make_direct_conv2d(const Conv2dShape& s, const float* weight, const float* bias);

// A kGemm1x1 Conv2D's packed weight (B^T = weight [oc, c]) and clamp; null for other objects.
struct PointwiseParts {
  std::shared_ptr<const PackedB> b;
  float lo, hi;
};
const PointwiseParts* pointwise_parts(const NativeOp& op);

// A depthwise Conv2D's packed weights and geometry (x, y, zeros unset); null for other objects.
struct DepthwiseParts {
  std::shared_ptr<const DwPacked> w;
  DwArgs args;
};
const DepthwiseParts* depthwise_parts(const NativeOp& op);

}  // namespace msv0
#endif
