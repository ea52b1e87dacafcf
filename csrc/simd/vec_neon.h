// NEON tier (aarch64 baseline). The 4-way int8 dot product widens: smull to int16 products,
// then two pairwise adds (saddlp, addp) gather each lane's four into int32.
#pragma once
#include "simd/neon_lanes.h"

namespace msv0 {
namespace MSV0_ISA {

constexpr bool kDot4Native = false;  // dot4 is several instructions (tile sizes depend on it)
constexpr int32_t kDotAOffset = 0;  // dot4 takes activations as int8
inline VecI8 to_dot_a(VecI8 a) { return a; }

// Lane j += Σ_{t<4} a[4j + t] · b[4j + t], all int8.
inline VecI32 dot4(VecI32 acc, VecI8 a, VecI8 b) {
  const int16x8_t lo = vmull_s8(vget_low_s8(a.v), vget_low_s8(b.v));
  const int16x8_t hi = vmull_high_s8(a.v, b.v);
  return {vaddq_s32(acc.v, vpaddq_s32(vpaddlq_s16(lo), vpaddlq_s16(hi)))};
}

}  // namespace MSV0_ISA
}  // namespace msv0
