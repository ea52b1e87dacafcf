// The float Binary kernel's arguments (binary_f32.cc), for the kernel objects that run it as a
// stage of their own: a Conv2D that absorbs the residual Add reading its output.
#pragma once
#include <cstdint>

namespace msv0 {

enum BinaryOpKind : int32_t {
  kBinAdd = 0, kBinSub = 1, kBinMul = 2, kBinDiv = 3, kBinMaximum = 4, kBinMinimum = 5, kBinSquaredDifference = 6
};

struct BinaryArgs {
  const float* a;
  const float* b;
  float* y;
  int64_t size, inner;  // output elements; row length for kOperandRow / kOperandPerRow operands
  int32_t op, a_kind, b_kind;
  bool clamp;  // a fused activation: without one NaN must pass through untouched
  float lo, hi;
};

using BinaryFn = void (*)(const BinaryArgs&, int64_t e0, int64_t e1);

}  // namespace msv0

#if MSV0_ONCE
#include "runtime/dispatch.h"

namespace msv0 {
class NativeOp;
// binary_f32.cc's slot table (its binding pass defines it).
KernelSlots<BinaryFn>& binary_f32_slots();
// A Binary object's arguments (pointers unset), or null for any other object and for a Binary
// with a post-op.
const BinaryArgs* binary_args(const NativeOp& op);
}  // namespace msv0
#endif
