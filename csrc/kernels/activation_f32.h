// Element-wise float32 activations (the kernel is in activation_f32.cc): the kinds and the
// argument block, shared with kernels that apply them to rows they produced themselves (Lstm's
// gates).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/dispatch.h"

namespace msv0 {

enum ActKind : int32_t {
  kActRelu = 0, kActRelu6, kActLeakyRelu, kActSigmoid, kActTanh, kActSwish, kActHswish, kActHsigmoid,
  kActHardTanh, kActPrelu, kActElu, kActExp, kActAbs, kActNeg, kActSquare, kActSqrt, kActRsqrt, kActReciprocal,
  kActLog, kActPowerInt, kActPower, kActFloor, kActCeil, kActRound, kActGeluTanh, kActGeluErf, kActKindCount
};

struct ActArgs {
  const float* x;
  float* y;
  const float* slope;  // PReLU: one value per index of the last dim (`channels` of them), or null
  int64_t channels;
  int32_t kind;
  // LEAKY_RELU/Elu alpha, shared PReLU slope, Exp input scale, Power scale; Exp output scale,
  // Power shift; HARD_TANH bounds; Power's exponent (an integer for kActPowerInt). GeluTanh: alpha, beta
  // are its c1, c2 (see activation_f32.cc).
  float alpha, beta, lo, hi, exponent;
};

using ActivationFn = void (*)(const ActArgs&, int64_t e0, int64_t e1);

#if MSV0_ONCE
// The slot table, defined by activation_f32.cc's binding pass.
KernelSlots<ActivationFn>& activation_f32_slots();

// An Activation step fused into the kernel that produces its input (a Conv2D): the producer
// applies it in place to each block of output it has just written, while the block is in cache.
// Results equal the two steps run apart: the same kernel on the same values.
struct PostOp {
  ActivationFn fn = nullptr;  // null: none
  ActArgs g{};
  std::shared_ptr<const std::vector<float>> slope;  // PReLU's per-channel slope (g.channels of it)
  // y[e] = f(y[e]) for e in [e0, e1) of the whole output y.
  void apply(float* y, int64_t e0, int64_t e1) const {
    if (!fn || e0 >= e1) return;
    ActArgs a = g;
    a.x = y;
    a.y = y;
    if (slope) a.slope = slope->data();
    fn(a, e0, e1);
  }
  // The same on channels [c0, c1) of pixels [p0, p1) of an output with `channels` per pixel.
  void apply_pixels(float* y, int64_t channels, int64_t p0, int64_t p1, int64_t c0, int64_t c1) const {
    if (c0 == 0 && c1 == channels) return apply(y, p0 * channels, p1 * channels);
    for (int64_t p = p0; p < p1; ++p) apply(y, p * channels + c0, p * channels + c1);
  }
};
#endif

}  // namespace msv0
