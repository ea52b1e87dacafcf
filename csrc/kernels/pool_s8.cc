// 2-D max and mean pooling, NHWC int8, r1.1's int8 kernels (format-v0.md §3.1), vectorised
// along C in int32 lanes. Windows are clipped to the image. Max: the largest cell (−128 for a
// window with no cell inside). Mean over cnt cells with sum S: q = floor((S + 128·cnt + cnt/2) /
// cnt), i.e. the mean rounded half up, plus 128, in [0, 255]. Both results then go through
// `table` (256 bytes, indexed by value + 128): r1.1's requantization to the output's params,
// which depends on the int8 value alone, precomputed by the caller; an identity table is skipped.
#include "kernels/pool_window.h"

namespace msv0 {

struct PoolS8Args {
  const int8_t* x;  // n x h x w x c
  int8_t* y;        // n x oh x ow x c
  const int8_t* table;  // null: identity
  PoolWindow win;
};

// Work items [i0, i1) (for_each_window in pool_window.h).
using PoolS8Fn = void (*)(const PoolS8Args&, int64_t i0, int64_t i1);
MSV0_DECLARE(maxpool2d_s8, PoolS8Fn)
MSV0_DECLARE(avgpool2d_s8, PoolS8Fn)

// The most cells a mean window may hold: S + 128·cnt + cnt/2 then stays below 2^15 (r1.1 forms
// it in int16) and the division by cnt below is exact.
constexpr int64_t kPoolS8MaxCount = 128;

}  // namespace msv0

#if !MSV0_ONCE
namespace msv0 {
namespace MSV0_ISA {
namespace {

// Channels [c, c + lanes) of one output pixel over its clipped window.
template <bool Max, bool Tail>
void window(const PoolS8Args& a, const PoolSpan& span, int64_t c, int64_t lanes) {
  VecI32 acc = Max ? VecI32::splat(-128) : VecI32::zero();
  for (int64_t iy = span.y0; iy < span.y1; ++iy)
    for (int64_t ix = span.x0; ix < span.x1; ++ix) {
      const VecI32 v = load_s8_n<Tail>(a.x + span.x_at + (iy * a.win.w + ix) * a.win.c + c, lanes);
      acc = Max ? max(acc, v) : acc + v;
    }
  int8_t* out = a.y + span.y_at;
  if (Max) {
    Tail ? acc.store_s8_tail(out + c, lanes) : acc.store_s8(out + c);
    if (a.table)
      for (int64_t i = 0; i < lanes; ++i) out[c + i] = a.table[out[c + i] + 128];
    return;
  }
  // Division by cnt as a multiply by ceil(2^32 / cnt): exact while numerator · cnt < 2^32,
  // which kPoolS8MaxCount guarantees.
  const int64_t cnt = (span.y1 - span.y0) * (span.x1 - span.x0);
  const uint64_t inv = ((uint64_t{1} << 32) + static_cast<uint64_t>(cnt) - 1) / static_cast<uint64_t>(cnt);
  const VecI32 sum = acc + VecI32::splat(static_cast<int32_t>(128 * cnt + cnt / 2));
  int32_t s[VecI32::kLanes];
  sum.store(s);
  for (int64_t i = 0; i < lanes; ++i) {
    const int64_t q = static_cast<int64_t>((static_cast<uint64_t>(s[i]) * inv) >> 32);
    out[c + i] = a.table ? a.table[q] : static_cast<int8_t>(q - 128);
  }
}

template <bool Max>
void pool_items(const PoolS8Args& a, int64_t i0, int64_t i1) {
  for_each_window(a.win, i0, i1, [&a](const PoolSpan& span) {
    int64_t c = span.c0;
    for (; c + VecI32::kLanes <= span.c1; c += VecI32::kLanes) window<Max, false>(a, span, c, VecI32::kLanes);
    if (c < span.c1) window<Max, true>(a, span, c, span.c1 - c);
  });
}

}  // namespace

void maxpool2d_s8(const PoolS8Args& a, int64_t i0, int64_t i1) { pool_items<true>(a, i0, i1); }
void avgpool2d_s8(const PoolS8Args& a, int64_t i0, int64_t i1) { pool_items<false>(a, i0, i1); }

MSV0_EXPORT(maxpool2d_s8)
MSV0_EXPORT(avgpool2d_s8)
}  // namespace MSV0_ISA
}  // namespace msv0

#else  // binding pass
#include <algorithm>
#include <string>
#include <vector>
#include <pybind11/stl.h>

#include "runtime/native.h"

namespace msv0 {
namespace {

// The most cells inside the image of any window along one axis, and whether some window has none.
void window_cells(int64_t size, int64_t k, int64_t s, int64_t p, int64_t out, int64_t* most, bool* empty) {
  *most = 0;
  *empty = false;
  for (int64_t o = 0; o < out; ++o) {
    const int64_t lo = std::max<int64_t>(o * s - p, 0), hi = std::min<int64_t>(o * s - p + k, size);
    *most = std::max(*most, hi - lo);
    *empty = *empty || hi <= lo;
  }
}

class Pool2dS8 : public NativeOp {
 public:
  Pool2dS8(bool max, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t pt, int64_t pl, const py::array& table,
           const std::vector<int64_t>& x_shape, const std::vector<int64_t>& y_shape)
      : fn_(max ? MSV0_DISPATCH(maxpool2d_s8) : MSV0_DISPATCH(avgpool2d_s8)) {
    const PoolWindow win = pool_window(kh, kw, sh, sw, pt, pl, x_shape, y_shape);
    expect_shape(table, {256}, "table");
    const int8_t* t = in_ptr<int8_t>(table, "table");
    if (!max) {
      int64_t rows, cols;
      bool empty_rows, empty_cols;
      window_cells(win.h, kh, sh, pt, win.oh, &rows, &empty_rows);
      window_cells(win.w, kw, sw, pl, win.ow, &cols, &empty_cols);
      if (empty_rows || empty_cols) throw ArgError("a mean window holds no cell of the input");
      if (rows * cols > kPoolS8MaxCount)
        throw ArgError("a mean window holds " + std::to_string(rows * cols) + " cells, more than " +
                       std::to_string(kPoolS8MaxCount) + " (r1.1's int16 sum would overflow)");
    }
    bool identity = true;
    for (int v = 0; v < 256; ++v) identity = identity && t[v] == v - 128;
    table_.assign(t, t + 256);
    a_ = PoolS8Args{nullptr, nullptr, identity ? nullptr : table_.data(), win};
    set_operands({{x_shape, 'b'}}, {{y_shape, 'b'}});
  }

  void run(const void* const* in, void* const* out) const override {
    PoolS8Args a = a_;
    a.x = static_cast<const int8_t*>(in[0]);
    a.y = static_cast<int8_t*>(out[0]);
    parallel_for(pool_item_count(a.win), 1, [&](int64_t i0, int64_t i1) { fn_(a, i0, i1); });
  }
  const char* name() const override { return "pool2d_s8"; }

 private:
  PoolS8Fn fn_;
  std::vector<int8_t> table_;
  PoolS8Args a_;
};

}  // namespace

MSV0_BIND(m) {
  py::class_<Pool2dS8, NativeOp, std::shared_ptr<Pool2dS8>>(m, "Pool2dS8",
      "int8 max (max=True) or mean pooling over the cells inside the image, NHWC, r1.1 arithmetic, of x [n, h, w, c]\n"
      "into y [n, oh, ow, c]; the max, or the mean rounded half up, v maps to table[v + 128].")
      .def(py::init<bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, const py::array&,
                    const std::vector<int64_t>&, const std::vector<int64_t>&>(),
           py::arg("max"), py::arg("kh"), py::arg("kw"), py::arg("sh"), py::arg("sw"), py::arg("pt"), py::arg("pl"),
           py::arg("table"), py::arg("x_shape"), py::arg("y_shape"));
}

}  // namespace msv0
#endif
