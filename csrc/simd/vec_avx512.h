// AVX-512 (F/BW/DQ/VL) tier, also the base of the VNNI tier: 16 float lanes, masked tails.
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
inline float reduce_add(VecF a) { return _mm512_reduce_add_ps(a.v); }
inline float reduce_max(VecF a) { return _mm512_reduce_max_ps(a.v); }

}  // namespace MSV0_ISA
}  // namespace msv0
