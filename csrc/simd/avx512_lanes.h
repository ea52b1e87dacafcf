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
// Whether any lane is subnormal, infinite or NaN: a fast path's rare exit.
inline bool any_subnormal_or_nonfinite(VecF a) {
  return _mm512_fpclass_ps_mask(a.v, 0x01 | 0x08 | 0x10 | 0x20 | 0x80) != 0;  // QNaN, ±inf, denormal, SNaN
}

// 64 bytes: int8 values, or uint8 as dot4's first operand on the VNNI tier.
struct VecI8 {
  static constexpr int kBytes = 64;
  __m512i v;
  static VecI8 load(const int8_t* p) { return {_mm512_loadu_si512(p)}; }
  // The first n (< 64) bytes at p, zeros after them; bytes past p + n are not read.
  static VecI8 load_tail(const int8_t* p, int64_t n) {
    return {_mm512_maskz_loadu_epi8((uint64_t{1} << n) - 1, p)};
  }
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
  // Each lane narrowed to int8, saturating (Requant leaves its clamp to [-128, 127] to this).
  void store_s8(int8_t* p) const { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtsepi32_epi8(v)); }
  void store_s8_tail(int8_t* p, int64_t n) const { _mm512_mask_cvtsepi32_storeu_epi8(p, tail_mask16(n), v); }
};

// Integer arithmetic wraps modulo 2^32, as r1.1's int32 accumulators do.
inline VecI32 operator+(VecI32 a, VecI32 b) { return {_mm512_add_epi32(a.v, b.v)}; }
inline VecI32 operator-(VecI32 a, VecI32 b) { return {_mm512_sub_epi32(a.v, b.v)}; }
inline VecI32 operator*(VecI32 a, VecI32 b) { return {_mm512_mullo_epi32(a.v, b.v)}; }
// acc + x · w per lane, for x and w that fit int16 (x sign-extended, w from as_mul16_weight):
// one vpmaddwd (vpdpwssd with VNNI) against vpmulld's two slow uops. w's upper half is zero, so
// the pair sum is x · w alone, and wraps like the int32 arithmetic it replaces.
inline VecI32 as_mul16_weight(VecI32 w) { return {_mm512_and_si512(w.v, _mm512_set1_epi32(0xFFFF))}; }
#ifdef __AVX512VNNI__
inline VecI32 mul_add16(VecI32 acc, VecI32 x, VecI32 w) { return {_mm512_dpwssd_epi32(acc.v, x.v, w.v)}; }
#else
inline VecI32 mul_add16(VecI32 acc, VecI32 x, VecI32 w) { return {_mm512_add_epi32(acc.v, _mm512_madd_epi16(x.v, w.v))}; }
#endif
inline int32_t reduce_add(VecI32 a) { return _mm512_reduce_add_epi32(a.v); }
inline VecI32 max(VecI32 a, VecI32 b) { return {_mm512_max_epi32(a.v, b.v)}; }
inline VecI32 min(VecI32 a, VecI32 b) { return {_mm512_min_epi32(a.v, b.v)}; }
inline VecI32 operator&(VecI32 a, VecI32 b) { return {_mm512_and_si512(a.v, b.v)}; }
// Arithmetic right shifts (floor division by 2^n), n in [0, 31].
inline VecI32 shift_right(VecI32 a, int n) { return {_mm512_srai_epi32(a.v, static_cast<unsigned>(n))}; }
inline VecI32 shift_right(VecI32 a, VecI32 n) { return {_mm512_srav_epi32(a.v, n.v)}; }

// r1.1's MultiplyByQuantizedMultiplier + zero point + clamp for one vector of channels
// (format-v0.md §3.1): clamp(RDBPOT(SRDHM(acc · 2^left, mult), right) + zp, lo, hi), left and
// right in [0, 31], mult != INT32_MIN (SRDHM never saturates; the bindings check it). The
// per-channel constants are made once; a caller applies it to every row of those channels.
// Both roundings become one 64-bit shift of the product p = (acc · 2^left) · mult. SRDHM is
// h = floor((p + 2^30) / 2^31) (r1.1's trunc((p + nudge) / 2^31) for every p), and RDBPOT's
// half-away-from-zero rounding is floor((h + c) / 2^r) with c = 2^(r-1) - [h < 0] (c = 0 for
// r = 0). Nested floors of integers merge: q = floor((p + 2^30 + c·2^31) / 2^(31+r)), and
// h < 0 exactly when p < -2^30. |p| < 2^62, so the sum stays inside int64.
struct Requant {
  __m512i mult, mult_odd, left, bias_even, bias_odd, neg_even, neg_odd, shift_even, shift_odd, right_m1, zp, lo, hi;
  bool shifts_left, clamps, right_pos;

  Requant(VecI32 m, VecI32 l, VecI32 r, VecI32 z, VecI32 lo_, VecI32 hi_)
      : mult(m.v), mult_odd(_mm512_srli_epi64(m.v, 32)), left(l.v), zp(z.v), lo(lo_.v), hi(hi_.v),
        shifts_left(_mm512_test_epi32_mask(l.v, l.v) != 0),
        clamps(_mm512_cmpgt_epi32_mask(lo_.v, _mm512_set1_epi32(-128)) != 0 ||
               _mm512_cmplt_epi32_mask(hi_.v, _mm512_set1_epi32(127)) != 0),
        right_pos(_mm512_cmpgt_epi32_mask(r.v, _mm512_setzero_si512()) == 0xFFFF) {
    const __m512i low = _mm512_set1_epi64(0xFFFFFFFF);
    const __m512i r_even = _mm512_and_si512(r.v, low), r_odd = _mm512_srli_epi64(r.v, 32);
    // bias = 2^30 + 2^(r-1)·2^31 = 2^30 + 2^(r+30) where r > 0; neg = 2^31 taken off when h < 0.
    const __m512i one = _mm512_set1_epi64(1), b30 = _mm512_set1_epi64(int64_t{1} << 30);
    const __m512i b31 = _mm512_set1_epi64(int64_t{1} << 31), zero = _mm512_setzero_si512();
    const auto bias = [&](__m512i rr) {
      const __mmask8 pos = _mm512_cmpgt_epi64_mask(rr, zero);
      return _mm512_mask_add_epi64(b30, pos, b30, _mm512_sllv_epi64(one, _mm512_add_epi64(rr, _mm512_set1_epi64(30))));
    };
    bias_even = bias(r_even), bias_odd = bias(r_odd);
    neg_even = _mm512_maskz_mov_epi64(_mm512_cmpgt_epi64_mask(r_even, zero), b31);
    neg_odd = _mm512_maskz_mov_epi64(_mm512_cmpgt_epi64_mask(r_odd, zero), b31);
    shift_even = _mm512_add_epi64(r_even, _mm512_set1_epi64(31));
    shift_odd = _mm512_add_epi64(r_odd, _mm512_set1_epi64(31));
    right_m1 = _mm512_sub_epi32(r.v, _mm512_set1_epi32(1));
  }

  // Lanes outside [-128, 127] where the clamp is all of int8: store_s8 saturates them. Shuffles
  // rather than 64-bit shifts move the odd lanes: Zen 4 runs shifts on half its vector pipes.
  VecI32 operator()(VecI32 acc) const {
    const __m512i x = shifts_left ? _mm512_sllv_epi32(acc.v, left) : acc.v;  // wraps, like r1.1's int multiply
    const __m512i below = _mm512_set1_epi64(-(int64_t{1} << 30));
    const __m512i pe = _mm512_mul_epi32(x, mult);
    const __m512i po = _mm512_mul_epi32(_mm512_shuffle_epi32(x, _MM_PERM_DDBB), mult_odd);
    __m512i te = _mm512_add_epi64(pe, bias_even), to = _mm512_add_epi64(po, bias_odd);
    te = _mm512_mask_sub_epi64(te, _mm512_cmplt_epi64_mask(pe, below), te, neg_even);
    to = _mm512_mask_sub_epi64(to, _mm512_cmplt_epi64_mask(po, below), to, neg_odd);
    // q = floor(t / 2^(31+r)). With r >= 1 that is the high dword of t shifted right by r − 1
    // (bit 31 of t adds at most 1/2 before a floor by 2^(r−1) >= 1, and cannot change it): one
    // 32-bit shift of the high dwords gathered into one vector. Else each quotient in its qword's
    // low dword, and the odd ones moved up beside the even ones.
    const __m512i q = right_pos ? _mm512_srav_epi32(_mm512_mask_shuffle_epi32(to, 0x5555, te, _MM_PERM_DDBB), right_m1)
                                : _mm512_mask_shuffle_epi32(_mm512_srav_epi64(te, shift_even), 0xAAAA,
                                                            _mm512_srav_epi64(to, shift_odd), _MM_PERM_CCAA);
    const __m512i y = _mm512_add_epi32(q, zp);
    return {clamps ? _mm512_min_epi32(hi, _mm512_max_epi32(lo, y)) : y};
  }
};

// int32 -> float per lane, rounding to nearest even (exact below 2^24).
inline VecF to_f32(VecI32 a) { return {_mm512_cvtepi32_ps(a.v)}; }
// float -> int32 per lane, truncating toward zero; the caller keeps lanes inside int32 (NaN and
// out-of-range results differ between tiers).
inline VecI32 trunc_i32(VecF a) { return {_mm512_cvttps_epi32(a.v)}; }
// float -> int32 per lane, rounding toward -inf (the caller keeps lanes inside int32).
inline VecI32 floor_i32(VecF a) { return {_mm512_cvt_roundps_epi32(a.v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)}; }
// Whether some lane of a differs from b's.
inline bool any_ne(VecI32 a, VecI32 b) { return _mm512_cmpneq_epi32_mask(a.v, b.v) != 0; }
// The bits of a float lane as int32, and back.
inline VecI32 bits(VecF a) { return {_mm512_castps_si512(a.v)}; }
inline VecF from_bits(VecI32 a) { return {_mm512_castsi512_ps(a.v)}; }
// Left shift, n in [0, 31] (wraps).
inline VecI32 shift_left(VecI32 a, int n) { return {_mm512_slli_epi32(a.v, static_cast<unsigned>(n))}; }

}  // namespace MSV0_ISA
}  // namespace msv0
