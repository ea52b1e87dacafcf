// AVX-512 VNNI tier: AVX-512 plus vpdpbusd, which multiplies unsigned by signed bytes. Activations
// enter it shifted to uint8 (a + 128); the kernel subtracts 128 · Σ_k b per column again.
#pragma once
#include "simd/avx512_lanes.h"

#ifndef __AVX512VNNI__
#error "vec_avx512vnni.h needs -mavx512vnni"
#endif

namespace msv0 {
namespace MSV0_ISA {

constexpr bool kDot4Native = true;
constexpr int32_t kDotAOffset = 128;  // dot4's first operand is a + 128 as uint8
inline VecI8 to_dot_a(VecI8 a) { return {_mm512_xor_si512(a.v, _mm512_set1_epi8(-128))}; }

// Lane j += Σ_{t<4} a[4j + t] · b[4j + t], a uint8, b int8 (no saturation: vpdpbusd, not vpdpbusds).
inline VecI32 dot4(VecI32 acc, VecI8 a, VecI8 b) { return {_mm512_dpbusd_epi32(acc.v, a.v, b.v)}; }

}  // namespace MSV0_ISA
}  // namespace msv0
