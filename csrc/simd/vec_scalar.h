// Scalar tier: one lane. The reference every other tier is tested against.
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
inline float reduce_add(VecF a) { return a.v; }
inline float reduce_max(VecF a) { return a.v; }

}  // namespace MSV0_ISA
}  // namespace msv0
