// AVX-512 (F/BW/DQ/VL) tier. Without VNNI the 4-way int8 dot product is two vpmaddwd on the
// sign-extended even and odd bytes: int8·int8 pairs summed in int32 cannot saturate, unlike
// vpmaddubsw, whose int16 pair sums can.
#pragma once
#include "simd/avx512_lanes.h"

namespace msv0 {
namespace MSV0_ISA {

constexpr bool kDot4Native = false;  // dot4 is several instructions (tile sizes depend on it)
constexpr int32_t kDotAOffset = 0;  // dot4 takes activations as int8
inline VecI8 to_dot_a(VecI8 a) { return a; }

// Lane j += Σ_{t<4} a[4j + t] · b[4j + t], all int8.
inline VecI32 dot4(VecI32 acc, VecI8 a, VecI8 b) {
  const __m512i a_even = _mm512_srai_epi16(_mm512_slli_epi16(a.v, 8), 8), a_odd = _mm512_srai_epi16(a.v, 8);
  const __m512i b_even = _mm512_srai_epi16(_mm512_slli_epi16(b.v, 8), 8), b_odd = _mm512_srai_epi16(b.v, 8);
  const __m512i sum = _mm512_add_epi32(_mm512_madd_epi16(a_even, b_even), _mm512_madd_epi16(a_odd, b_odd));
  return {_mm512_add_epi32(acc.v, sum)};
}

}  // namespace MSV0_ISA
}  // namespace msv0
