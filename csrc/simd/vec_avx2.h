// AVX2 + FMA tier: 8 float lanes; tails use maskload/maskstore (no reads or writes past n).
#pragma once
#include <immintrin.h>

#include <cstdint>

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

}  // namespace MSV0_ISA
}  // namespace msv0
