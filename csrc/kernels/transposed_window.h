// The gather rule of transposed convolutions (deconv2d_f32.cc, dedwconv2d_f32.cc): input index i
// with tap t lands on full-output position i·s + t·d, so an output pixel reads the taps whose i
// is whole and in range.
#pragma once
#include <cstdint>

namespace msv0 {
namespace MSV0_ISA {  // compiled per tier, like kernel.h's helpers (style.md's linkage rule)

// The input index i (< n) whose tap t lands on full-output position pos, if there is one.
inline bool transposed_source(int64_t pos, int64_t t, int64_t s, int64_t d, int64_t n, int64_t* i) {
  const int64_t q = pos - t * d;
  if (q < 0 || q % s) return false;
  *i = q / s;
  return *i < n;
}

}  // namespace MSV0_ISA
}  // namespace msv0
