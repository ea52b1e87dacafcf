// AVX2 + FMA tier: 8 float or int32 lanes, 32 int8 lanes; tails use maskload/maskstore, int8
// tails a general register (tail_bytes.h): no reads or writes past n. The 4-way int8 dot product is two vpmaddwd on the sign-extended even
// and odd bytes: int8·int8 pairs summed in int32 cannot saturate, unlike vpmaddubsw, whose int16
// pair sums can.
#pragma once
#include <immintrin.h>

#include <cstdint>

#include "simd/tail_bytes.h"

namespace msv0 {
namespace MSV0_ISA {

inline __m256i tail_mask8(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

struct VecF {
  static constexpr int kLanes = 8;
  __m256 v;
  static VecF load(const float* p) { return {_mm256_loadu_ps(p)}; }
  static VecF load_tail(const float* p, int64_t n) { return {_mm256_maskload_ps(p, tail_mask8(n))}; }
  static VecF splat(float x) { return {_mm256_set1_ps(x)}; }
  static VecF zero() { return {_mm256_setzero_ps()}; }
  void store(float* p) const { _mm256_storeu_ps(p, v); }
  void store_tail(float* p, int64_t n) const { _mm256_maskstore_ps(p, tail_mask8(n), v); }
};

inline VecF operator+(VecF a, VecF b) { return {_mm256_add_ps(a.v, b.v)}; }
inline VecF operator-(VecF a, VecF b) { return {_mm256_sub_ps(a.v, b.v)}; }
inline VecF operator*(VecF a, VecF b) { return {_mm256_mul_ps(a.v, b.v)}; }
inline VecF operator/(VecF a, VecF b) { return {_mm256_div_ps(a.v, b.v)}; }
inline VecF fmadd(VecF a, VecF b, VecF c) { return {_mm256_fmadd_ps(a.v, b.v, c.v)}; }
inline VecF max(VecF a, VecF b) { return {_mm256_max_ps(a.v, b.v)}; }
inline VecF min(VecF a, VecF b) { return {_mm256_min_ps(a.v, b.v)}; }
inline VecF sqrt(VecF a) { return {_mm256_sqrt_ps(a.v)}; }
inline float reduce_add(VecF a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a.v), _mm256_extractf128_ps(a.v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
inline float reduce_max(VecF a) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(a.v), _mm256_extractf128_ps(a.v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)));
}
// a < b (a <= b) ? x : y, false where unordered.
inline VecF select_lt(VecF a, VecF b, VecF x, VecF y) {
  return {_mm256_blendv_ps(y.v, x.v, _mm256_cmp_ps(a.v, b.v, _CMP_LT_OQ))};
}
inline VecF select_le(VecF a, VecF b, VecF x, VecF y) {
  return {_mm256_blendv_ps(y.v, x.v, _mm256_cmp_ps(a.v, b.v, _CMP_LE_OQ))};
}
// Whether any lane is subnormal, infinite or NaN: a fast path's rare exit.
inline bool any_subnormal_or_nonfinite(VecF a) {
  const __m256 m = _mm256_andnot_ps(_mm256_set1_ps(-0.f), a.v);
  const __m256 sub = _mm256_and_ps(_mm256_cmp_ps(m, _mm256_setzero_ps(), _CMP_GT_OQ),
                                   _mm256_cmp_ps(m, _mm256_set1_ps(0x1p-126f), _CMP_LT_OQ));
  const __m256 big = _mm256_cmp_ps(m, _mm256_set1_ps(0x1.fffffep127f), _CMP_NLE_UQ);  // inf or NaN
  return _mm256_movemask_ps(_mm256_or_ps(sub, big)) != 0;
}

struct VecI8 {
  static constexpr int kBytes = 32;
  __m256i v;
  static VecI8 load(const int8_t* p) { return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))}; }
  // The first n (< kBytes) bytes at p, zeros after them; bytes past p + n are not read.
  static VecI8 load_tail(const int8_t* p, int64_t n) {
    int8_t t[kBytes] = {};
    __builtin_memcpy(t, p, static_cast<size_t>(n));
    return load(t);
  }
  // The 4 bytes at p in every 32-bit lane: one row's k group against 8 columns of B.
  static VecI8 splat4(const int8_t* p) {
    int32_t w;
    __builtin_memcpy(&w, p, 4);
    return {_mm256_set1_epi32(w)};
  }
  void store(int8_t* p) const { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
};

struct VecI32 {
  static constexpr int kLanes = 8;
  __m256i v;
  static VecI32 load(const int32_t* p) { return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))}; }
  // kLanes int8 values, sign-extended (tail: the first n, the rest 0).
  static VecI32 load_s8(const int8_t* p) {
    return {_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)))};
  }
  static VecI32 load_s8_tail(const int8_t* p, int64_t n) {
    return {_mm256_cvtepi8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(load_tail_bytes(p, n))))};
  }
  static VecI32 splat(int32_t x) { return {_mm256_set1_epi32(x)}; }
  static VecI32 zero() { return {_mm256_setzero_si256()}; }
  void store(int32_t* p) const { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
  void store_tail(int32_t* p, int64_t n) const { _mm256_maskstore_epi32(p, tail_mask8(n), v); }
  // Each lane narrowed to int8 (the caller has clamped it to [-128, 127]).
  void store_s8(int8_t* p) const { _mm_storel_epi64(reinterpret_cast<__m128i*>(p), narrow()); }
  void store_s8_tail(int8_t* p, int64_t n) const {
    store_tail_bytes(p, static_cast<uint64_t>(_mm_cvtsi128_si64(narrow())), n);
  }
  __m128i narrow() const {
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    return _mm_packs_epi16(w, w);
  }
};

// Integer arithmetic wraps modulo 2^32, as r1.1's int32 accumulators do.
inline VecI32 operator+(VecI32 a, VecI32 b) { return {_mm256_add_epi32(a.v, b.v)}; }
inline VecI32 operator-(VecI32 a, VecI32 b) { return {_mm256_sub_epi32(a.v, b.v)}; }
inline VecI32 operator*(VecI32 a, VecI32 b) { return {_mm256_mullo_epi32(a.v, b.v)}; }
// acc + x · w per lane, for x and w that fit int16 (x sign-extended, w from as_mul16_weight):
// vpmaddwd against vpmulld's two slow uops; w's upper half is zero, so the pair sum is x · w.
inline VecI32 as_mul16_weight(VecI32 w) { return {_mm256_and_si256(w.v, _mm256_set1_epi32(0xFFFF))}; }
inline VecI32 mul_add16(VecI32 acc, VecI32 x, VecI32 w) { return {_mm256_add_epi32(acc.v, _mm256_madd_epi16(x.v, w.v))}; }
inline int32_t reduce_add(VecI32 a) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(a.v), _mm256_extracti128_si256(a.v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  return _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, 1)));
}
inline VecI32 max(VecI32 a, VecI32 b) { return {_mm256_max_epi32(a.v, b.v)}; }
inline VecI32 min(VecI32 a, VecI32 b) { return {_mm256_min_epi32(a.v, b.v)}; }
inline VecI32 operator&(VecI32 a, VecI32 b) { return {_mm256_and_si256(a.v, b.v)}; }
// Arithmetic right shifts (floor division by 2^n), n in [0, 31].
inline VecI32 shift_right(VecI32 a, int n) { return {_mm256_srai_epi32(a.v, n)}; }
inline VecI32 shift_right(VecI32 a, VecI32 n) { return {_mm256_srav_epi32(a.v, n.v)}; }

constexpr bool kDot4Native = false;  // dot4 is several instructions (tile sizes depend on it)
constexpr int32_t kDotAOffset = 0;  // dot4 takes activations as int8
inline VecI8 to_dot_a(VecI8 a) { return a; }

// Lane j += Σ_{t<4} a[4j + t] · b[4j + t], all int8.
inline VecI32 dot4(VecI32 acc, VecI8 a, VecI8 b) {
  const __m256i a_even = _mm256_srai_epi16(_mm256_slli_epi16(a.v, 8), 8), a_odd = _mm256_srai_epi16(a.v, 8);
  const __m256i b_even = _mm256_srai_epi16(_mm256_slli_epi16(b.v, 8), 8), b_odd = _mm256_srai_epi16(b.v, 8);
  const __m256i sum = _mm256_add_epi32(_mm256_madd_epi16(a_even, b_even), _mm256_madd_epi16(a_odd, b_odd));
  return {_mm256_add_epi32(acc.v, sum)};
}

// r1.1's MultiplyByQuantizedMultiplier + zero point + clamp for one vector of channels
// (format-v0.md §3.1): clamp(RDBPOT(SRDHM(acc · 2^left, mult), right) + zp, lo, hi), left and
// right in [0, 31], mult != INT32_MIN (SRDHM never saturates; the bindings check it). The
// per-channel constants are made once; a caller applies it to every row of those channels.
// SRDHM(a, b) = round(a·b / 2^31) with ties toward +inf: for every a·b, r1.1's
// trunc((a·b + nudge) / 2^31) equals floor((a·b + 2^30) / 2^31), bits 31..62 of a·b + 2^30
// (a logical 64-bit shift leaves them in the low half: AVX2 has no arithmetic one).
// RDBPOT: arithmetic shift, plus one where the remainder exceeds half (half or more when
// negative), i.e. rounding half away from zero.
struct Requant {
  __m256i mult, mult_odd, left, right, mask, half_mask, zp, lo, hi;

  Requant(VecI32 m, VecI32 l, VecI32 r, VecI32 z, VecI32 lo_, VecI32 hi_)
      : mult(m.v), mult_odd(_mm256_srli_epi64(m.v, 32)), left(l.v), right(r.v),
        mask(_mm256_sub_epi32(_mm256_sllv_epi32(_mm256_set1_epi32(1), r.v), _mm256_set1_epi32(1))),
        half_mask(_mm256_srli_epi32(mask, 1)), zp(z.v), lo(lo_.v), hi(hi_.v) {}

  VecI32 operator()(VecI32 acc) const {
    const __m256i x = _mm256_sllv_epi32(acc.v, left);  // wraps, like r1.1's int multiply
    const __m256i half = _mm256_set1_epi64x(int64_t{1} << 30);
    const __m256i even = _mm256_add_epi64(_mm256_mul_epi32(x, mult), half);
    const __m256i odd = _mm256_add_epi64(_mm256_mul_epi32(_mm256_srli_epi64(x, 32), mult_odd), half);
    const __m256i h = _mm256_blend_epi32(_mm256_srli_epi64(even, 31), _mm256_slli_epi64(odd, 1), 0xAA);
    const __m256i rem = _mm256_and_si256(h, mask);
    const __m256i threshold = _mm256_add_epi32(half_mask, _mm256_srli_epi32(h, 31));
    __m256i q = _mm256_sub_epi32(_mm256_srav_epi32(h, right), _mm256_cmpgt_epi32(rem, threshold));
    q = _mm256_add_epi32(q, zp);
    return {_mm256_min_epi32(hi, _mm256_max_epi32(lo, q))};
  }
};

// int32 -> float per lane, rounding to nearest even (exact below 2^24).
inline VecF to_f32(VecI32 a) { return {_mm256_cvtepi32_ps(a.v)}; }
// float -> int32 per lane, truncating toward zero; the caller keeps lanes inside int32 (NaN and
// out-of-range results differ between tiers).
inline VecI32 trunc_i32(VecF a) { return {_mm256_cvttps_epi32(a.v)}; }
// float -> int32 per lane, rounding toward -inf (the caller keeps lanes inside int32).
inline VecI32 floor_i32(VecF a) { return {_mm256_cvtps_epi32(_mm256_floor_ps(a.v))}; }
// Whether some lane of a differs from b's.
inline bool any_ne(VecI32 a, VecI32 b) { return _mm256_movemask_epi8(_mm256_cmpeq_epi32(a.v, b.v)) != -1; }
// The bits of a float lane as int32, and back.
inline VecI32 bits(VecF a) { return {_mm256_castps_si256(a.v)}; }
inline VecF from_bits(VecI32 a) { return {_mm256_castsi256_ps(a.v)}; }
// Left shift, n in [0, 31] (wraps).
inline VecI32 shift_left(VecI32 a, int n) { return {_mm256_slli_epi32(a.v, n)}; }

}  // namespace MSV0_ISA
}  // namespace msv0
