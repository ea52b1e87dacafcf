// AVX512-BF16 on top of the AVX-512 lanes, for the one kernel that uses it (gemm_bf16.cc).
// BF16 is a CPU feature of that kernel rather than a tier of its own (a tier would compile and
// test every kernel once more for one GEMM): the includer compiles this header and its bf16
// code under MSV0_TARGET_PUSH("avx512bf16") (simd/pragmas.h) and fills its slot only when the
// CPU has it. vdpbf16ps multiplies two bf16 pairs per 32-bit lane and adds both products to that
// lane's float.
#pragma once
#include "simd/avx512_lanes.h"

namespace msv0 {
namespace MSV0_ISA {

// 16 lanes, each a pair of bf16 values (the first in the low half): two consecutive k of one
// row of A, or of one column of B.
struct VecBf16x2 {
  __m512i v;
  static VecBf16x2 load(const uint32_t* p) { return {_mm512_loadu_si512(p)}; }
  static VecBf16x2 splat(const uint32_t* p) { return {_mm512_set1_epi32(static_cast<int>(*p))}; }
  void store(uint32_t* p) const { _mm512_storeu_si512(p, v); }
};

// 32 floats rounded to bf16 (to nearest, ties to even) and kept in order: lo's 16 in lanes
// 0-7, hi's 16 in lanes 8-15, so consecutive floats become the pairs of one lane.
inline VecBf16x2 to_bf16(VecF lo, VecF hi) { return {(__m512i)_mm512_cvtne2ps_pbh(hi.v, lo.v)}; }

// Lane j += a.lo[j] * b.lo[j] + a.hi[j] * b.hi[j], in float.
inline VecF dot2(VecF acc, VecBf16x2 a, VecBf16x2 b) {
  return {_mm512_dpbf16_ps(acc.v, (__m512bh)a.v, (__m512bh)b.v)};
}

}  // namespace MSV0_ISA
}  // namespace msv0
