// The window walk both pooling kernels share (pool_f32.cc, pool_s8.cc): NHWC, each window
// clipped to the image, work split into items of one output row and one block of channels.
#pragma once
#include "kernels/kernel.h"

namespace msv0 {

struct PoolWindow {
  int64_t n, h, w, c, oh, ow;
  int64_t kh, kw, sh, sw, pt, pl;
  int64_t cblock;  // channels per work item (a multiple of 16, or c)
};

}  // namespace msv0

#if MSV0_ONCE
#include <vector>

namespace msv0 {

// The window of x [n, h, w, c] -> y [n, oh, ow, c], checked.
inline PoolWindow pool_window(int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t pt, int64_t pl,
                              const std::vector<int64_t>& x_shape, const std::vector<int64_t>& y_shape) {
  if (kh < 1 || kw < 1) throw ArgError("window must be >= 1");
  check_strides(sh, sw, 1, 1);
  check_pads(pt, pl);
  const auto& x = checked_shape(x_shape, 4, "x_shape");
  const auto& y = checked_shape(y_shape, 4, "y_shape");
  if (y[0] != x[0] || y[3] != x[3]) throw ArgError("y_shape: batch and channels must be x's");
  PoolWindow p{x[0], x[1], x[2], x[3], y[1], y[2], kh, kw, sh, sw, pt, pl, x[3]};
  if (p.n * p.oh < 8 && p.c > 64) p.cblock = 64;  // few rows (a global pool): split channels too
  return p;
}

inline int64_t pool_item_count(const PoolWindow& p) { return p.n * p.oh * ((p.c + p.cblock - 1) / p.cblock); }

}  // namespace msv0

#else
namespace msv0 {
namespace MSV0_ISA {

// One output pixel's share of a work item: the window [y0, y1) x [x0, x1) of the image that
// starts at element x_at of x, channels [c0, c1), written to the pixel at element y_at of y.
struct PoolSpan {
  int64_t x_at, y_at, y0, y1, x0, x1, c0, c1;
};

// pixel(span) for each output pixel of work items [i0, i1): item i is output row
// i / items_per_row of the flattened (n, oh), channel block i % items_per_row.
template <class Pixel>
void for_each_window(const PoolWindow& p, int64_t i0, int64_t i1, Pixel&& pixel) {
  const int64_t per_row = (p.c + p.cblock - 1) / p.cblock;
  for (int64_t i = i0; i < i1; ++i) {
    const int64_t r = i / per_row, c0 = i % per_row * p.cblock, c1 = min_i(c0 + p.cblock, p.c);
    const int64_t b = r / p.oh, oy = r % p.oh;
    const int64_t y0 = max_i(oy * p.sh - p.pt, 0), y1 = min_i(oy * p.sh - p.pt + p.kh, p.h);
    for (int64_t ox = 0; ox < p.ow; ++ox) {
      const int64_t x0 = max_i(ox * p.sw - p.pl, 0), x1 = min_i(ox * p.sw - p.pl + p.kw, p.w);
      pixel(PoolSpan{b * p.h * p.w * p.c, (r * p.ow + ox) * p.c, y0, y1, x0, x1, c0, c1});
    }
  }
}

}  // namespace MSV0_ISA
}  // namespace msv0
#endif
