// 2-D max and mean pooling, NHWC float32, vectorised along C (contiguous in NHWC).
// Windows are clipped to the image (r1.1 semantics): max ignores padded cells, mean divides
// by the number of cells inside the image. The result is clamped to [lo, hi], which the
// caller intersects with [-FLT_MAX, FLT_MAX] as r1.1's fp32 kernel always does. A mean window
// with no cell inside the image gives NaN; the Pooling op rejects such geometry when planning.
#include "kernels/kernel.h"

namespace msv0 {

struct PoolArgs {
  const float* x;  // n x h x w x c
  float* y;        // n x oh x ow x c
  int64_t n, h, w, c, oh, ow;
  int64_t kh, kw, sh, sw, pt, pl;
  int64_t cblock;  // channels per work item (a multiple of 16, or c)
  float lo, hi;
};

// Work items [i0, i1): item i is output row i / items_per_row, channel block i % items_per_row.
using PoolFn = void (*)(const PoolArgs&, int64_t i0, int64_t i1);
MSV0_DECLARE(maxpool2d_f32, PoolFn)
MSV0_DECLARE(avgpool2d_f32, PoolFn)

}  // namespace msv0

#if !MSV0_ONCE
namespace msv0 {
namespace MSV0_ISA {
namespace {

// U channel vectors of one output pixel over the clipped window [y0,y1) x [x0,x1). U
// independent chains hide the max/add latency (a 7x7 global window is 49 dependent steps).
// Sums run ky-major, kx-minor from zero, the order r1.1 uses, so results match it bitwise.
template <bool Max, int U, bool Tail>
void window(const PoolArgs& a, const float* xb, int64_t y0, int64_t y1, int64_t x0, int64_t x1, float* out,
            int64_t c, int64_t lanes) {
  VecF acc[U];
  for (int u = 0; u < U; ++u) acc[u] = Max ? VecF::splat(-3.402823466e38f) : VecF::zero();
  for (int64_t iy = y0; iy < y1; ++iy)
    for (int64_t ix = x0; ix < x1; ++ix) {
      const float* p = xb + (iy * a.w + ix) * a.c + c;
      for (int u = 0; u < U; ++u) {
        const VecF v = load_n<Tail>(p + u * VecF::kLanes, lanes);
        acc[u] = Max ? max(acc[u], v) : acc[u] + v;
      }
    }
  const VecF lo = VecF::splat(a.lo), hi = VecF::splat(a.hi);
  const VecF count = VecF::splat(static_cast<float>((y1 - y0) * (x1 - x0)));
  for (int u = 0; u < U; ++u) {
    VecF r = Max ? acc[u] : acc[u] / count;
    r = min(max(r, lo), hi);
    if (Tail)
      r.store_tail(out + c + u * VecF::kLanes, lanes);
    else
      r.store(out + c + u * VecF::kLanes);
  }
}

template <bool Max>
void pool_items(const PoolArgs& a, int64_t i0, int64_t i1) {
  const int64_t per_row = (a.c + a.cblock - 1) / a.cblock;
  for (int64_t i = i0; i < i1; ++i) {
    const int64_t r = i / per_row, c0 = i % per_row * a.cblock, c1 = min_i(c0 + a.cblock, a.c);
    const int64_t b = r / a.oh, oy = r % a.oh;
    const int64_t y0 = max_i(oy * a.sh - a.pt, 0), y1 = min_i(oy * a.sh - a.pt + a.kh, a.h);
    const float* xb = a.x + b * a.h * a.w * a.c;
    for (int64_t ox = 0; ox < a.ow; ++ox) {
      const int64_t x0 = max_i(ox * a.sw - a.pl, 0), x1 = min_i(ox * a.sw - a.pl + a.kw, a.w);
      float* out = a.y + (r * a.ow + ox) * a.c;
      int64_t c = c0;
      for (; c + 4 * VecF::kLanes <= c1; c += 4 * VecF::kLanes)
        window<Max, 4, false>(a, xb, y0, y1, x0, x1, out, c, VecF::kLanes);
      for (; c + VecF::kLanes <= c1; c += VecF::kLanes)
        window<Max, 1, false>(a, xb, y0, y1, x0, x1, out, c, VecF::kLanes);
      if (c < c1) window<Max, 1, true>(a, xb, y0, y1, x0, x1, out, c, c1 - c);
    }
  }
}

}  // namespace

void maxpool2d_f32(const PoolArgs& a, int64_t i0, int64_t i1) { pool_items<true>(a, i0, i1); }
void avgpool2d_f32(const PoolArgs& a, int64_t i0, int64_t i1) { pool_items<false>(a, i0, i1); }

MSV0_EXPORT(maxpool2d_f32)
MSV0_EXPORT(avgpool2d_f32)
}  // namespace MSV0_ISA
}  // namespace msv0

#else  // binding pass
#include <string>
#include <vector>
#include <pybind11/stl.h>

#include "runtime/native.h"

namespace msv0 {
namespace {

// Max (or mean) pooling of x [n, h, w, c] into y [n, oh, ow, c], the shapes fixed here.
class Pool2d : public NativeOp {
 public:
  Pool2d(bool max, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t pt, int64_t pl,
         const std::vector<int64_t>& x_shape, const std::vector<int64_t>& y_shape, float lo, float hi)
      : max_(max), fn_(max ? MSV0_DISPATCH(maxpool2d_f32) : MSV0_DISPATCH(avgpool2d_f32)) {
    if (kh < 1 || kw < 1) throw ArgError("window must be >= 1");
    check_strides(sh, sw, 1, 1);
    check_pads(pt, pl);
    const auto& x = checked_shape(x_shape, 4, "x_shape");
    const auto& y = checked_shape(y_shape, 4, "y_shape");
    if (y[0] != x[0] || y[3] != x[3]) throw ArgError("y_shape: batch and channels must be x's");
    a_ = PoolArgs{nullptr, nullptr, x[0], x[1], x[2], x[3], y[1], y[2], kh, kw, sh, sw, pt, pl, x[3], lo, hi};
    if (a_.n * a_.oh < 8 && a_.c > 64) a_.cblock = 64;  // few rows (a global pool): split channels too
    set_operands({{x}}, {{y}});
  }

  void run(const void* const* in, void* const* out) const override {
    PoolArgs a = a_;
    a.x = static_cast<const float*>(in[0]);
    a.y = static_cast<float*>(out[0]);
    const int64_t items = a.n * a.oh * ((a.c + a.cblock - 1) / a.cblock);
    parallel_for(items, 1, [&](int64_t i0, int64_t i1) { fn_(a, i0, i1); });
  }
  const char* name() const override { return max_ ? "maxpool2d" : "avgpool2d"; }

 private:
  bool max_;
  PoolFn fn_;
  PoolArgs a_;
};

}  // namespace

MSV0_BIND(m) {
  py::class_<Pool2d, NativeOp, std::shared_ptr<Pool2d>>(m, "Pool2d",
      "Max pooling (max=True) or mean pooling over the cells inside the image, NHWC float32, of x [n, h, w, c] "
      "into y [n, oh, ow, c]; result clamped to [lo, hi].")
      .def(py::init<bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, const std::vector<int64_t>&,
                    const std::vector<int64_t>&, float, float>(),
           py::arg("max"), py::arg("kh"), py::arg("kw"), py::arg("sh"), py::arg("sw"), py::arg("pt"), py::arg("pl"),
           py::arg("x_shape"), py::arg("y_shape"), py::arg("lo"), py::arg("hi"));
}

}  // namespace msv0
#endif
