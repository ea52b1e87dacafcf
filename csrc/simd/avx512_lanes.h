// AVX-512 (F/BW/DQ/VL) lanes shared by the avx512 and avx512vnni tiers (vec_avx512.h and
// vec_avx512vnni.h add the 4-way dot product each tier has): 16 float or int32 lanes, 64 int8
// lanes, masked tails.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace msv0 {
namespace MSV0_ISA {

inline __mmask16 tail_mask16(int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }

struct VecF {
  static constexpr int kLanes = 16;
  __m512 v;
  static VecF load(const float* p) { return {_mm512_loadu_ps(p)}; }
  static VecF load_tail(const float* p, int64_t n) { return {_mm512_maskz_loadu_ps(tail_mask16(n), p)}; }
  static VecF splat(float x) { return {_mm512_set1_ps(x)}; }
  static VecF zero() { return {_mm512_setzero_ps()}; }
  void store(float* p) const { _mm512_storeu_ps(p, v); }
  void store_tail(float* p, int64_t n) const { _mm512_mask_storeu_ps(p, tail_mask16(n), v); }
};

inline VecF operator+(VecF a, VecF b) { return {_mm512_add_ps(a.v, b.v)}; }
inline VecF operator-(VecF a, VecF b) { return {_mm512_sub_ps(a.v, b.v)}; }
inline VecF operator*(VecF a, VecF b) { return {_mm512_mul_ps(a.v, b.v)}; }
inline VecF operator/(VecF a, VecF b) { return {_mm512_div_ps(a.v, b.v)}; }
inline VecF fmadd(VecF a, VecF b, VecF c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
inline VecF max(VecF a, VecF b) { return {_mm512_max_ps(a.v, b.v)}; }
inline VecF min(VecF a, VecF b) { return {_mm512_min_ps(a.v, b.v)}; }
inline VecF sqrt(VecF a) { return {_mm512_sqrt_ps(a.v)}; }
inline float reduce_add(VecF a) { return _mm512_reduce_add_ps(a.v); }
inline float reduce_max(VecF a) { return _mm512_reduce_max_ps(a.v); }
// a < b (a <= b) ? x : y, false where unordered.
inline VecF select_lt(VecF a, VecF b, VecF x, VecF y) {
  return {_mm512_mask_blend_ps(_mm512_cmp_ps_mask(a.v, b.v, _CMP_LT_OQ), y.v, x.v)};
}
inline VecF select_le(VecF a, VecF b, VecF x, VecF y) {
  return {_mm512_mask_blend_ps(_mm512_cmp_ps_mask(a.v, b.v, _CMP_LE_OQ), y.v, x.v)};
}

// 64 bytes: int8 values, or uint8 as dot4's first operand on the VNNI tier.
struct VecI8 {
  static constexpr int kBytes = 64;
  __m512i v;
  static VecI8 load(const int8_t* p) { return {_mm512_loadu_si512(p)}; }
  // The 4 bytes at p in every 32-bit lane: one row's k group against 16 columns of B.
  static VecI8 splat4(const int8_t* p) {
    int32_t w;
    __builtin_memcpy(&w, p, 4);
    return {_mm512_set1_epi32(w)};
  }
  void store(int8_t* p) const { _mm512_storeu_si512(p, v); }
};

struct VecI32 {
  static constexpr int kLanes = 16;
  __m512i v;
  static VecI32 load(const int32_t* p) { return {_mm512_loadu_si512(p)}; }
  // kLanes int8 values, sign-extended (tail: the first n, the rest 0).
  static VecI32 load_s8(const int8_t* p) {
    return {_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))};
  }
  static VecI32 load_s8_tail(const int8_t* p, int64_t n) {
    return {_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(tail_mask16(n), p))};
  }
  static VecI32 splat(int32_t x) { return {_mm512_set1_epi32(x)}; }
  static VecI32 zero() { return {_mm512_setzero_si512()}; }
  void store(int32_t* p) const { _mm512_storeu_si512(p, v); }
  void store_tail(int32_t* p, int64_t n) const { _mm512_mask_storeu_epi32(p, tail_mask16(n), v); }
  // Each lane narrowed to int8 (the caller has clamped it to [-128, 127]).
  void store_s8(int8_t* p) const { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(v)); }
  void store_s8_tail(int8_t* p, int64_t n) const { _mm512_mask_cvtepi32_storeu_epi8(p, tail_mask16(n), v); }
};

// Integer arithmetic wraps modulo 2^32, as r1.1's int32 accumulators do.
inline VecI32 operator+(VecI32 a, VecI32 b) { return {_mm512_add_epi32(a.v, b.v)}; }
inline VecI32 operator-(VecI32 a, VecI32 b) { return {_mm512_sub_epi32(a.v, b.v)}; }
inline VecI32 operator*(VecI32 a, VecI32 b) { return {_mm512_mullo_epi32(a.v, b.v)}; }
inline int32_t reduce_add(VecI32 a) { return _mm512_reduce_add_epi32(a.v); }
inline VecI32 max(VecI32 a, VecI32 b) { return {_mm512_max_epi32(a.v, b.v)}; }
inline VecI32 min(VecI32 a, VecI32 b) { return {_mm512_min_epi32(a.v, b.v)}; }
inline VecI32 operator&(VecI32 a, VecI32 b) { return {_mm512_and_si512(a.v, b.v)}; }
// Arithmetic right shifts (floor division by 2^n), n in [0, 31].
inline VecI32 shift_right(VecI32 a, int n) { return {_mm512_srai_epi32(a.v, static_cast<unsigned>(n))}; }
inline VecI32 shift_right(VecI32 a, VecI32 n) { return {_mm512_srav_epi32(a.v, n.v)}; }

// r1.1's MultiplyByQuantizedMultiplier + zero point + clamp on every lane (format-v0.md §3.1):
//   clamp(RDBPOT(SRDHM(acc · 2^left, mult), right) + zp, lo, hi), left and right in [0, 31].
// SRDHM(a, b) = round(a·b / 2^31) with ties toward +inf: for every a·b, r1.1's
// trunc((a·b + nudge) / 2^31) equals floor((a·b + 2^30) / 2^31), bits 31..62 of a·b + 2^30.
inline VecI32 requantize(VecI32 acc, VecI32 mult, VecI32 left, VecI32 right, VecI32 zp, VecI32 lo, VecI32 hi) {
  const __m512i x = _mm512_sllv_epi32(acc.v, left.v);  // wraps, like r1.1's int multiply
  const __m512i half = _mm512_set1_epi64(int64_t{1} << 30);
  const __m512i even = _mm512_add_epi64(_mm512_mul_epi32(x, mult.v), half);
  const __m512i odd =
      _mm512_add_epi64(_mm512_mul_epi32(_mm512_srli_epi64(x, 32), _mm512_srli_epi64(mult.v, 32)), half);
  __m512i h = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 31), _mm512_slli_epi64(odd, 1));
  // Only INT32_MIN · INT32_MIN reaches 2^31, which wrapped to INT32_MIN: SRDHM saturates it.
  const __m512i int_min = _mm512_set1_epi32(INT32_MIN);
  h = _mm512_mask_mov_epi32(h, _mm512_cmpeq_epi32_mask(h, int_min), _mm512_set1_epi32(INT32_MAX));
  // RDBPOT: arithmetic shift, plus one where the remainder exceeds half (half or more when
  // negative), i.e. rounding half away from zero.
  const __m512i one = _mm512_set1_epi32(1);
  const __m512i mask = _mm512_sub_epi32(_mm512_sllv_epi32(one, right.v), one);
  const __m512i rem = _mm512_and_si512(h, mask);
  const __m512i threshold = _mm512_add_epi32(_mm512_srli_epi32(mask, 1), _mm512_srli_epi32(h, 31));
  __m512i q = _mm512_srav_epi32(h, right.v);
  q = _mm512_mask_add_epi32(q, _mm512_cmpgt_epi32_mask(rem, threshold), q, one);
  q = _mm512_add_epi32(q, zp.v);
  return {_mm512_min_epi32(hi.v, _mm512_max_epi32(lo.v, q))};
}

// int32 -> float per lane, rounding to nearest even (exact below 2^24).
inline VecF to_f32(VecI32 a) { return {_mm512_cvtepi32_ps(a.v)}; }
// float -> int32 per lane, truncating toward zero; the caller keeps lanes inside int32 (NaN and
// out-of-range results differ between tiers).
inline VecI32 trunc_i32(VecF a) { return {_mm512_cvttps_epi32(a.v)}; }
// The bits of a float lane as int32, and back.
inline VecI32 bits(VecF a) { return {_mm512_castps_si512(a.v)}; }
inline VecF from_bits(VecI32 a) { return {_mm512_castsi512_ps(a.v)}; }
// Left shift, n in [0, 31] (wraps).
inline VecI32 shift_left(VecI32 a, int n) { return {_mm512_slli_epi32(a.v, static_cast<unsigned>(n))}; }

}  // namespace MSV0_ISA
}  // namespace msv0
