// NEON tier with the dot-product extension (ARMv8.2 DotProd): the 4-way int8 dot product is
// one sdot.
#pragma once
#include "simd/neon_lanes.h"

#ifndef __ARM_FEATURE_DOTPROD
#error "vec_neondot.h needs +dotprod"
#endif

namespace msv0 {
namespace MSV0_ISA {

constexpr bool kDot4Native = true;
constexpr int32_t kDotAOffset = 0;  // sdot takes activations as int8
inline VecI8 to_dot_a(VecI8 a) { return a; }

// Lane j += Σ_{t<4} a[4j + t] · b[4j + t], all int8.
inline VecI32 dot4(VecI32 acc, VecI8 a, VecI8 b) { return {vdotq_s32(acc.v, a.v, b.v)}; }

}  // namespace MSV0_ISA
}  // namespace msv0
