// 2-D max and mean pooling, NHWC float32, vectorised along C (contiguous in NHWC).
// Windows are clipped to the image (r1.1 semantics): max ignores padded cells, mean divides
// by the number of cells inside the image. The result is clamped to [lo, hi], which the
// caller intersects with [-FLT_MAX, FLT_MAX] as r1.1's fp32 kernel always does. A mean window
// with no cell inside the image gives NaN; the Pooling op rejects such geometry when planning.
#include "kernels/pool_window.h"

namespace msv0 {

struct PoolArgs {
  const float* x;  // n x h x w x c
  float* y;        // n x oh x ow x c
  PoolWindow win;
  float lo, hi;
};

// Work items [i0, i1) (for_each_window in pool_window.h).
using PoolFn = void (*)(const PoolArgs&, int64_t i0, int64_t i1);
MSV0_DECLARE(maxpool2d_f32, PoolFn)
MSV0_DECLARE(avgpool2d_f32, PoolFn)

}  // namespace msv0

#if !MSV0_ONCE
namespace msv0 {
namespace MSV0_ISA {
namespace {

// U channel vectors from channel c of one output pixel over its clipped window. U
// independent chains hide the max/add latency (a 7x7 global window is 49 dependent steps).
// Sums run ky-major, kx-minor from zero, the order r1.1 uses, so results match it bitwise.
template <bool Max, int U, bool Tail>
void window(const PoolArgs& a, const PoolSpan& span, int64_t c, int64_t lanes) {
  VecF acc[U];
  for (int u = 0; u < U; ++u) acc[u] = Max ? VecF::splat(-3.402823466e38f) : VecF::zero();
  for (int64_t iy = span.y0; iy < span.y1; ++iy)
    for (int64_t ix = span.x0; ix < span.x1; ++ix) {
      const float* p = a.x + span.x_at + (iy * a.win.w + ix) * a.win.c + c;
      for (int u = 0; u < U; ++u) {
        const VecF v = load_n<Tail>(p + u * VecF::kLanes, lanes);
        acc[u] = Max ? max(acc[u], v) : acc[u] + v;
      }
    }
  const VecF lo = VecF::splat(a.lo), hi = VecF::splat(a.hi);
  const VecF count = VecF::splat(static_cast<float>((span.y1 - span.y0) * (span.x1 - span.x0)));
  float* out = a.y + span.y_at;
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
  for_each_window(a.win, i0, i1, [&a](const PoolSpan& span) {
    int64_t c = span.c0;
    for (; c + 4 * VecF::kLanes <= span.c1; c += 4 * VecF::kLanes) window<Max, 4, false>(a, span, c, VecF::kLanes);
    for (; c + VecF::kLanes <= span.c1; c += VecF::kLanes) window<Max, 1, false>(a, span, c, VecF::kLanes);
    if (c < span.c1) window<Max, 1, true>(a, span, c, span.c1 - c);
  });
}

}  // namespace

void maxpool2d_f32(const PoolArgs& a, int64_t i0, int64_t i1) { pool_items<true>(a, i0, i1); }
void avgpool2d_f32(const PoolArgs& a, int64_t i0, int64_t i1) { pool_items<false>(a, i0, i1); }

MSV0_EXPORT(maxpool2d_f32)
MSV0_EXPORT(avgpool2d_f32)
}  // namespace MSV0_ISA
}  // namespace msv0

#else  // binding pass
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
      : max_(max), fn_(max ? MSV0_DISPATCH(maxpool2d_f32) : MSV0_DISPATCH(avgpool2d_f32)),
        a_{nullptr, nullptr, pool_window(kh, kw, sh, sw, pt, pl, x_shape, y_shape), lo, hi} {
    set_operands({{x_shape}}, {{y_shape}});
  }

  void run(const void* const* in, void* const* out) const override {
    PoolArgs a = a_;
    a.x = static_cast<const float*>(in[0]);
    a.y = static_cast<float*>(out[0]);
    const PoolWindow& w = a.win;
    parallel_for(pool_item_count(w), grain_for(w.ow * w.cblock * w.kh * w.kw),
                 [&](int64_t i0, int64_t i1) { fn_(a, i0, i1); });
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
