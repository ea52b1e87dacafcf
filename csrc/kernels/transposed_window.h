// The gather rule of transposed convolutions (deconv2d_f32.cc, dedwconv2d_f32.cc): input index i
// with tap t lands on full-output position i·s + t·d, so an output position reads the taps whose
// i is whole and in range. The binding pass lists those (tap, i) pairs once per op and axis, so
// the kernels' pixel loops neither divide nor test.
#pragma once
#include <cstdint>

namespace msv0 {

// Output position p reads taps tap[j] of inputs src[j], start[p] <= j < start[p + 1], in tap order.
struct TapList {
  const int64_t* start;
  const int64_t* tap;
  const int64_t* src;
};

}  // namespace msv0

#if MSV0_ONCE
#include <vector>

namespace msv0 {

// Owns a TapList: output positions [0, out) cropped at offset `start` of the full output, kernel
// size k, stride s, dilation d, input size n (start may be negative: those positions read nothing).
class TapTable {
 public:
  TapTable() = default;
  TapTable(int64_t out, int64_t start, int64_t k, int64_t s, int64_t d, int64_t n) {
    start_.reserve(static_cast<size_t>(out) + 1);
    for (int64_t p = 0; p < out; ++p) {
      start_.push_back(static_cast<int64_t>(tap_.size()));
      for (int64_t t = 0; t < k; ++t) {
        const int64_t q = p + start - t * d;
        if (q < 0 || q % s || q / s >= n) continue;
        tap_.push_back(t);
        src_.push_back(q / s);
      }
    }
    start_.push_back(static_cast<int64_t>(tap_.size()));
  }
  TapList list() const { return TapList{start_.data(), tap_.data(), src_.data()}; }

 private:
  std::vector<int64_t> start_, tap_, src_;
};

}  // namespace msv0
#endif
