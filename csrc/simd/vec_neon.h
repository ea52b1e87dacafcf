// NEON tier (aarch64 baseline): 4 float lanes; tails go through a small stack buffer so no
// lane reads or writes past n.
#pragma once
#include <arm_neon.h>

#include <cstdint>

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
inline float reduce_add(VecF a) { return vaddvq_f32(a.v); }
inline float reduce_max(VecF a) { return vmaxvq_f32(a.v); }

}  // namespace MSV0_ISA
}  // namespace msv0
