// What every kernel file includes. ISA passes (MSV0_ONCE unset) see only <cstddef>, <cstdint>,
// <cmath> and the SIMD header of their tier: no STL containers or templates shared with baseline
// code, so no inline function compiled with wider ISA flags can leak into baseline callers.
// The binding pass (MSV0_ONCE=1) sees pybind11 and the runtime instead.
#pragma once
#include <cmath>
#include <cstddef>  // size_t: libc++'s <cmath> does not declare it, libstdc++'s does
#include <cstdint>

#include "runtime/dispatch.h"

#if MSV0_ONCE
#include "runtime/bind.h"
#include "runtime/parallel.h"
#else
#include "simd/vec.h"
namespace msv0 {
namespace MSV0_ISA {
inline int64_t min_i(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t max_i(int64_t a, int64_t b) { return a > b ? a : b; }
// A hint that p's cache line is read soon; a compiler builtin, so every tier has it.
inline void prefetch(const void* p) { __builtin_prefetch(p); }
// A fused activation's clamp. max/min return their second operand when unordered, so NaN
// passes through as in r1.1's MSMIN(hi, MSMAX(lo, x)), and infinite bounds change nothing.
inline VecF clamp(VecF x, VecF lo, VecF hi) { return min(hi, max(lo, x)); }
// Whole-vector or tail (first `lanes` lanes) load and store, chosen at compile time so the
// channel loops of a kernel are written once for full vectors and for the last partial one.
template <bool Tail>
VecF load_n(const float* p, int64_t lanes) {
  return Tail ? VecF::load_tail(p, lanes) : VecF::load(p);
}
template <bool Tail>
void store_n(VecF v, float* p, int64_t lanes) {
  if (Tail)
    v.store_tail(p, lanes);
  else
    v.store(p);
}
// The same for int8 data in int32 lanes (sign-extended loads, narrowing stores).
template <bool Tail>
VecI32 load_s8_n(const int8_t* p, int64_t lanes) {
  return Tail ? VecI32::load_s8_tail(p, lanes) : VecI32::load_s8(p);
}
template <bool Tail>
void store_s8_n(VecI32 v, int8_t* p, int64_t lanes) {
  if (Tail)
    v.store_s8_tail(p, lanes);
  else
    v.store_s8(p);
}
}  // namespace MSV0_ISA
}  // namespace msv0
#endif
