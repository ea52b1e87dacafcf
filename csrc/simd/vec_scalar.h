// Scalar tier: one lane (4 int8 for the 4-way dot product). The reference every other tier is
// tested against.
#pragma once
#include <cstdint>

namespace msv0 {
namespace MSV0_ISA {

struct VecF {
  static constexpr int kLanes = 1;
  float v;
  static VecF load(const float* p) { return {*p}; }
  static VecF load_tail(const float* p, int64_t) { return {*p}; }
  static VecF splat(float x) { return {x}; }
  static VecF zero() { return {0.f}; }
  void store(float* p) const { *p = v; }
  void store_tail(float* p, int64_t) const { *p = v; }
};

inline VecF operator+(VecF a, VecF b) { return {a.v + b.v}; }
inline VecF operator-(VecF a, VecF b) { return {a.v - b.v}; }
inline VecF operator*(VecF a, VecF b) { return {a.v * b.v}; }
inline VecF operator/(VecF a, VecF b) { return {a.v / b.v}; }
inline VecF fmadd(VecF a, VecF b, VecF c) { return {a.v * b.v + c.v}; }
// NaN-propagation of max/min follows x86 maxps: the second operand wins when unordered.
inline VecF max(VecF a, VecF b) { return {a.v > b.v ? a.v : b.v}; }
inline VecF min(VecF a, VecF b) { return {a.v < b.v ? a.v : b.v}; }
inline VecF sqrt(VecF a) { return {__builtin_sqrtf(a.v)}; }  // correctly rounded, as on every tier
inline float reduce_add(VecF a) { return a.v; }
inline float reduce_max(VecF a) { return a.v; }
// a < b (a <= b) ? x : y, false where unordered.
inline VecF select_lt(VecF a, VecF b, VecF x, VecF y) { return a.v < b.v ? x : y; }
inline VecF select_le(VecF a, VecF b, VecF x, VecF y) { return a.v <= b.v ? x : y; }

struct VecI8 {
  static constexpr int kBytes = 4;
  int8_t v[4];
  static VecI8 load(const int8_t* p) { return {{p[0], p[1], p[2], p[3]}}; }
  static VecI8 load_tail(const int8_t* p, int64_t n) {
    VecI8 r{};
    for (int64_t i = 0; i < n; ++i) r.v[i] = p[i];
    return r;
  }
  static VecI8 splat4(const int8_t* p) { return load(p); }
  void store(int8_t* p) const {
    for (int i = 0; i < 4; ++i) p[i] = v[i];
  }
};

// Arithmetic in uint32_t: it wraps modulo 2^32 like the SIMD tiers and r1.1's int32
// accumulators, where signed overflow would be undefined.
struct VecI32 {
  static constexpr int kLanes = 1;
  int32_t v;
  static VecI32 load(const int32_t* p) { return {*p}; }
  // kLanes int8 values, sign-extended (tail: the first n).
  static VecI32 load_s8(const int8_t* p) { return {*p}; }
  static VecI32 load_s8_tail(const int8_t* p, int64_t) { return {*p}; }
  static VecI32 splat(int32_t x) { return {x}; }
  static VecI32 zero() { return {0}; }
  void store(int32_t* p) const { *p = v; }
  void store_tail(int32_t* p, int64_t) const { *p = v; }
  void store_s8(int8_t* p) const { *p = static_cast<int8_t>(v); }
  void store_s8_tail(int8_t* p, int64_t) const { *p = static_cast<int8_t>(v); }
};

inline int32_t wrap(uint32_t x) { return static_cast<int32_t>(x); }
inline VecI32 operator+(VecI32 a, VecI32 b) { return {wrap(uint32_t(a.v) + uint32_t(b.v))}; }
inline VecI32 operator-(VecI32 a, VecI32 b) { return {wrap(uint32_t(a.v) - uint32_t(b.v))}; }
inline VecI32 operator*(VecI32 a, VecI32 b) { return {wrap(uint32_t(a.v) * uint32_t(b.v))}; }
// acc + x · w for x and w that fit int16 (the x86 tiers multiply such lanes in one instruction).
inline VecI32 as_mul16_weight(VecI32 w) { return w; }
inline VecI32 mul_add16(VecI32 acc, VecI32 x, VecI32 w) { return {wrap(uint32_t(acc.v) + uint32_t(x.v) * uint32_t(w.v))}; }
inline int32_t reduce_add(VecI32 a) { return a.v; }
inline VecI32 max(VecI32 a, VecI32 b) { return {a.v > b.v ? a.v : b.v}; }
inline VecI32 min(VecI32 a, VecI32 b) { return {a.v < b.v ? a.v : b.v}; }
inline VecI32 operator&(VecI32 a, VecI32 b) { return {a.v & b.v}; }
// Arithmetic right shifts (floor division by 2^n), n in [0, 31].
inline VecI32 shift_right(VecI32 a, int n) { return {a.v >> n}; }
inline VecI32 shift_right(VecI32 a, VecI32 n) { return {a.v >> n.v}; }

constexpr bool kDot4Native = false;
constexpr int32_t kDotAOffset = 0;  // dot4 takes activations as int8
inline VecI8 to_dot_a(VecI8 a) { return a; }

// acc += Σ_{t<4} a[t] · b[t]
inline VecI32 dot4(VecI32 acc, VecI8 a, VecI8 b) {
  int32_t s = 0;
  for (int t = 0; t < 4; ++t) s += a.v[t] * b.v[t];
  return acc + VecI32{s};
}

// r1.1's MultiplyByQuantizedMultiplier + zero point + clamp (format-v0.md §3.1) for one vector
// of channels, written as §3.1 states it: clamp(RDBPOT(SRDHM(acc · 2^left, mult), right) + zp,
// lo, hi), left and right in [0, 31], mult != INT32_MIN (so SRDHM never saturates; the
// bindings check it). Built once per channel vector, applied to every row.
struct Requant {
  VecI32 mult, left, right, zp, lo, hi;

  VecI32 operator()(VecI32 acc) const {
    const int32_t x = wrap(uint32_t(acc.v) << left.v);
    const int64_t p = int64_t{x} * mult.v;
    const int64_t nudge = p >= 0 ? (int64_t{1} << 30) : 1 - (int64_t{1} << 30);
    const int32_t h = static_cast<int32_t>((p + nudge) / (int64_t{1} << 31));
    const int32_t mask = wrap((uint32_t{1} << right.v) - 1u);
    const int32_t rem = h & mask, threshold = (mask >> 1) + (h < 0 ? 1 : 0);
    const int32_t q = wrap(uint32_t(h >> right.v) + (rem > threshold ? 1u : 0u) + uint32_t(zp.v));
    return {q < lo.v ? lo.v : q > hi.v ? hi.v : q};
  }
};

// int32 -> float per lane, rounding to nearest even (exact below 2^24).
inline VecF to_f32(VecI32 a) { return {static_cast<float>(a.v)}; }
// float -> int32 per lane, truncating toward zero; the caller keeps lanes inside int32 (NaN and
// out-of-range results differ between tiers).
inline VecI32 trunc_i32(VecF a) { return {static_cast<int32_t>(a.v)}; }
// float -> int32 per lane, rounding toward -inf (the caller keeps lanes inside int32).
inline VecI32 floor_i32(VecF a) { return {static_cast<int32_t>(__builtin_floorf(a.v))}; }
// Whether some lane of a differs from b's.
inline bool any_ne(VecI32 a, VecI32 b) { return a.v != b.v; }
// The bits of a float lane as int32, and back.
inline VecI32 bits(VecF a) {
  VecI32 r;
  __builtin_memcpy(&r.v, &a.v, 4);
  return r;
}
inline VecF from_bits(VecI32 a) {
  VecF r;
  __builtin_memcpy(&r.v, &a.v, 4);
  return r;
}
// Left shift, n in [0, 31] (wraps).
inline VecI32 shift_left(VecI32 a, int n) { return {wrap(uint32_t(a.v) << n)}; }

}  // namespace MSV0_ISA
}  // namespace msv0
