// Element-wise float32 activations (the kernel is in activation_f32.cc): the kinds and the
// argument block, shared with kernels that apply them to rows they produced themselves (Lstm's
// gates).
#pragma once
#include <cstdint>

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
#endif

}  // namespace msv0
