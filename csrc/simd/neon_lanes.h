// NEON lanes shared by the neon and neondot tiers (vec_neon.h and vec_neondot.h add the 4-way
// dot product each tier has): 4 float or int32 lanes, 16 int8 lanes; float tails go through a
// small stack buffer, int8 tails through a general register (tail_bytes.h), so no lane reads or
// writes past n.
#pragma once
#include <arm_neon.h>

#include <cstdint>

#include "simd/tail_bytes.h"

namespace msv0 {
namespace MSV0_ISA {

struct VecF {
  static constexpr int kLanes = 4;
  float32x4_t v;
  static VecF load(const float* p) { return {vld1q_f32(p)}; }
  static VecF load_tail(const float* p, int64_t n) {
    float t[4] = {0.f, 0.f, 0.f, 0.f};
    for (int64_t i = 0; i < n; ++i) t[i] = p[i];
    return {vld1q_f32(t)};
  }
  static VecF splat(float x) { return {vdupq_n_f32(x)}; }
  static VecF zero() { return {vdupq_n_f32(0.f)}; }
  void store(float* p) const { vst1q_f32(p, v); }
  void store_tail(float* p, int64_t n) const {
    float t[4];
    vst1q_f32(t, v);
    for (int64_t i = 0; i < n; ++i) p[i] = t[i];
  }
};

inline VecF operator+(VecF a, VecF b) { return {vaddq_f32(a.v, b.v)}; }
inline VecF operator-(VecF a, VecF b) { return {vsubq_f32(a.v, b.v)}; }
inline VecF operator*(VecF a, VecF b) { return {vmulq_f32(a.v, b.v)}; }
inline VecF operator/(VecF a, VecF b) { return {vdivq_f32(a.v, b.v)}; }
inline VecF fmadd(VecF a, VecF b, VecF c) { return {vfmaq_f32(c.v, a.v, b.v)}; }
// Compare + select, not vmaxq/vminq (which return NaN when either lane is NaN): every tier
// must agree with the scalar reference, where the second operand wins when unordered.
inline VecF max(VecF a, VecF b) { return {vbslq_f32(vcgtq_f32(a.v, b.v), a.v, b.v)}; }
inline VecF min(VecF a, VecF b) { return {vbslq_f32(vcltq_f32(a.v, b.v), a.v, b.v)}; }
inline VecF sqrt(VecF a) { return {vsqrtq_f32(a.v)}; }
inline float reduce_add(VecF a) { return vaddvq_f32(a.v); }
inline float reduce_max(VecF a) { return vmaxvq_f32(a.v); }
// a < b (a <= b) ? x : y, false where unordered.
inline VecF select_lt(VecF a, VecF b, VecF x, VecF y) { return {vbslq_f32(vcltq_f32(a.v, b.v), x.v, y.v)}; }
inline VecF select_le(VecF a, VecF b, VecF x, VecF y) { return {vbslq_f32(vcleq_f32(a.v, b.v), x.v, y.v)}; }
// Whether any lane is subnormal, infinite or NaN: a fast path's rare exit.
inline bool any_subnormal_or_nonfinite(VecF a) {
  const float32x4_t m = vabsq_f32(a.v);
  const uint32x4_t sub = vandq_u32(vcgtq_f32(m, vdupq_n_f32(0.f)), vcltq_f32(m, vdupq_n_f32(0x1p-126f)));
  const uint32x4_t big = vmvnq_u32(vcleq_f32(m, vdupq_n_f32(0x1.fffffep127f)));  // inf or NaN
  return vmaxvq_u32(vorrq_u32(sub, big)) != 0;
}

struct VecI8 {
  static constexpr int kBytes = 16;
  int8x16_t v;
  static VecI8 load(const int8_t* p) { return {vld1q_s8(p)}; }
  // The first n (< kBytes) bytes at p, zeros after them; bytes past p + n are not read.
  static VecI8 load_tail(const int8_t* p, int64_t n) {
    int8_t t[kBytes] = {};
    __builtin_memcpy(t, p, static_cast<size_t>(n));
    return load(t);
  }
  // The 4 bytes at p in every 32-bit lane: one row's k group against 4 columns of B.
  static VecI8 splat4(const int8_t* p) {
    int32_t w;
    __builtin_memcpy(&w, p, 4);
    return {vreinterpretq_s8_s32(vdupq_n_s32(w))};
  }
  void store(int8_t* p) const { vst1q_s8(p, v); }
};

struct VecI32 {
  static constexpr int kLanes = 4;
  int32x4_t v;
  static VecI32 load(const int32_t* p) { return {vld1q_s32(p)}; }
  // kLanes int8 values, sign-extended (tail: the first n, the rest 0).
  static VecI32 load_s8(const int8_t* p) {
    int32_t w;
    __builtin_memcpy(&w, p, 4);
    return {vmovl_s16(vget_low_s16(vmovl_s8(vreinterpret_s8_s32(vdup_n_s32(w)))))};
  }
  static VecI32 load_s8_tail(const int8_t* p, int64_t n) {
    const uint32_t bits = static_cast<uint32_t>(load_tail_bytes(p, n));
    return {vmovl_s16(vget_low_s16(vmovl_s8(vreinterpret_s8_u32(vdup_n_u32(bits)))))};
  }
  static VecI32 splat(int32_t x) { return {vdupq_n_s32(x)}; }
  static VecI32 zero() { return {vdupq_n_s32(0)}; }
  void store(int32_t* p) const { vst1q_s32(p, v); }
  void store_tail(int32_t* p, int64_t n) const {
    int32_t t[4];
    vst1q_s32(t, v);
    for (int64_t i = 0; i < n; ++i) p[i] = t[i];
  }
  // Each lane narrowed to int8 (the caller has clamped it to [-128, 127]).
  void store_s8(int8_t* p) const {
    const uint32_t t = bytes();
    __builtin_memcpy(p, &t, 4);
  }
  void store_s8_tail(int8_t* p, int64_t n) const { store_tail_bytes(p, bytes(), n); }
  // The four lanes narrowed to bytes, in a general register.
  uint32_t bytes() const {
    const int16x4_t w = vmovn_s32(v);
    return vget_lane_u32(vreinterpret_u32_s8(vmovn_s16(vcombine_s16(w, w))), 0);
  }
};

// Integer arithmetic wraps modulo 2^32, as r1.1's int32 accumulators do.
inline VecI32 operator+(VecI32 a, VecI32 b) { return {vaddq_s32(a.v, b.v)}; }
inline VecI32 operator-(VecI32 a, VecI32 b) { return {vsubq_s32(a.v, b.v)}; }
inline VecI32 operator*(VecI32 a, VecI32 b) { return {vmulq_s32(a.v, b.v)}; }
// acc + x · w for x and w that fit int16 (the x86 tiers multiply such lanes in one instruction).
inline VecI32 as_mul16_weight(VecI32 w) { return w; }
inline VecI32 mul_add16(VecI32 acc, VecI32 x, VecI32 w) { return {vmlaq_s32(acc.v, x.v, w.v)}; }
inline int32_t reduce_add(VecI32 a) { return vaddvq_s32(a.v); }
inline VecI32 max(VecI32 a, VecI32 b) { return {vmaxq_s32(a.v, b.v)}; }
inline VecI32 min(VecI32 a, VecI32 b) { return {vminq_s32(a.v, b.v)}; }
inline VecI32 operator&(VecI32 a, VecI32 b) { return {vandq_s32(a.v, b.v)}; }
// Arithmetic right shifts (floor division by 2^n), n in [0, 31]: sshl by a negative count.
inline VecI32 shift_right(VecI32 a, int n) { return {vshlq_s32(a.v, vdupq_n_s32(-n))}; }
inline VecI32 shift_right(VecI32 a, VecI32 n) { return {vshlq_s32(a.v, vnegq_s32(n.v))}; }

// r1.1's MultiplyByQuantizedMultiplier + zero point + clamp for one vector of channels
// (format-v0.md §3.1): clamp(RDBPOT(SRDHM(acc · 2^left, mult), right) + zp, lo, hi), left and
// right in [0, 31], mult != INT32_MIN (the bindings check it; sqrdmulh would saturate anyway).
// The per-channel constants are made once; a caller applies it to every row of those channels.
// sqrdmulh is SRDHM exactly. RDBPOT is spelled out: srshl would round ties up instead of away
// from zero.
struct Requant {
  int32x4_t mult, left, neg_right, mask, half_mask, zp, lo, hi;

  Requant(VecI32 m, VecI32 l, VecI32 r, VecI32 z, VecI32 lo_, VecI32 hi_)
      : mult(m.v), left(l.v), neg_right(vnegq_s32(r.v)),
        mask(vsubq_s32(vshlq_s32(vdupq_n_s32(1), r.v), vdupq_n_s32(1))), half_mask(vshrq_n_s32(mask, 1)),
        zp(z.v), lo(lo_.v), hi(hi_.v) {}

  VecI32 operator()(VecI32 acc) const {
    const int32x4_t x = vshlq_s32(acc.v, left);  // wraps, like r1.1's int multiply
    const int32x4_t h = vqrdmulhq_s32(x, mult);
    const int32x4_t rem = vandq_s32(h, mask);
    const int32x4_t threshold =
        vaddq_s32(half_mask, vreinterpretq_s32_u32(vshrq_n_u32(vreinterpretq_u32_s32(h), 31)));
    // vshlq by a negative count is an arithmetic (truncating) right shift; a true compare is -1.
    int32x4_t q = vsubq_s32(vshlq_s32(h, neg_right), vreinterpretq_s32_u32(vcgtq_s32(rem, threshold)));
    q = vaddq_s32(q, zp);
    return {vminq_s32(hi, vmaxq_s32(lo, q))};
  }
};

// int32 -> float per lane, rounding to nearest even (exact below 2^24).
inline VecF to_f32(VecI32 a) { return {vcvtq_f32_s32(a.v)}; }
// float -> int32 per lane, truncating toward zero; the caller keeps lanes inside int32 (NaN and
// out-of-range results differ between tiers).
inline VecI32 trunc_i32(VecF a) { return {vcvtq_s32_f32(a.v)}; }
// float -> int32 per lane, rounding toward -inf (the caller keeps lanes inside int32).
inline VecI32 floor_i32(VecF a) { return {vcvtmq_s32_f32(a.v)}; }
// Whether some lane of a differs from b's.
inline bool any_ne(VecI32 a, VecI32 b) { return vminvq_u32(vceqq_s32(a.v, b.v)) == 0; }
// The bits of a float lane as int32, and back.
inline VecI32 bits(VecF a) { return {vreinterpretq_s32_f32(a.v)}; }
inline VecF from_bits(VecI32 a) { return {vreinterpretq_f32_s32(a.v)}; }
// Left shift, n in [0, 31] (wraps).
inline VecI32 shift_left(VecI32 a, int n) { return {vshlq_s32(a.v, vdupq_n_s32(n))}; }

}  // namespace MSV0_ISA
}  // namespace msv0
