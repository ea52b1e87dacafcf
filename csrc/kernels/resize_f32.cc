// Resize, NHWC float32 (format-v0.md §5), from per-axis source tables the op layer computes in
// r1.1's coordinates (python/msv0/ops/resize.py): nearest copies pixel (y0[oy], x0[ox]), of
// float32 or of int8 (ops/array_s8.py, where the quant params leave the values as they are);
// bilinear interpolates along x on rows y0 and y1, then between them, in r1.1's unfused order
// of operations. Channels are the vector lanes.
#include "kernels/kernel.h"
#include "simd/pragmas.h"

// r1.1's interpolation is unfused float arithmetic; an FMA contracted from it would round
// differently from r1.1 and from the tier without FMA.
MSV0_FP_CONTRACT_OFF

namespace msv0 {

struct ResizeArgs {
  const void* x;  // n x h x w x c
  void* y;        // n x oh x ow x c
  int64_t h, w, c, oh, ow;
  const int64_t *y0, *y1, *x0, *x1;  // source rows / columns per output row / column
  const float *wy, *wx;              // weights of y1 / x1 (bilinear)
  bool nearest;
  int64_t pixel_bytes;  // c elements of float32, or of int8 (nearest only)
};

// Output rows [r0, r1) of the flattened (n, oh).
using ResizeFn = void (*)(const ResizeArgs&, int64_t r0, int64_t r1);
MSV0_DECLARE(resize_f32, ResizeFn)

}  // namespace msv0

#if !MSV0_ONCE
namespace msv0 {
namespace MSV0_ISA {
namespace {

template <bool Tail>
void bilinear(const float* t0, const float* t1, const float* b0, const float* b1, VecF wx, VecF wy, float* out,
              int64_t lanes) {
  const VecF one = VecF::splat(1.f);
  const VecF line0 = load_n<Tail>(t0, lanes) * (one - wx) + load_n<Tail>(t1, lanes) * wx;
  const VecF line1 = load_n<Tail>(b0, lanes) * (one - wx) + load_n<Tail>(b1, lanes) * wx;
  store_n<Tail>(line0 * (one - wy) + line1 * wy, out, lanes);
}

}  // namespace

void resize_f32(const ResizeArgs& a, int64_t r0, int64_t r1) {
  const int64_t c = a.c, px = a.pixel_bytes;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t b = r / a.oh, oy = r % a.oh;
    if (a.nearest) {
      const char* row = static_cast<const char*>(a.x) + (b * a.h + a.y0[oy]) * a.w * px;
      char* out = static_cast<char*>(a.y) + r * a.ow * px;
      for (int64_t ox = 0; ox < a.ow; ++ox) __builtin_memcpy(out + ox * px, row + a.x0[ox] * px, static_cast<size_t>(px));
      continue;
    }
    const float* top = static_cast<const float*>(a.x) + (b * a.h + a.y0[oy]) * a.w * c;
    const float* bottom = static_cast<const float*>(a.x) + (b * a.h + a.y1[oy]) * a.w * c;
    float* out = static_cast<float*>(a.y) + r * a.ow * c;
    const VecF wy = VecF::splat(a.wy[oy]);
    for (int64_t ox = 0; ox < a.ow; ++ox) {
      const VecF wx = VecF::splat(a.wx[ox]);
      const int64_t i0 = a.x0[ox] * c, i1 = a.x1[ox] * c;
      float* o = out + ox * c;
      int64_t k = 0;
      for (; k + VecF::kLanes <= c; k += VecF::kLanes)
        bilinear<false>(top + i0 + k, top + i1 + k, bottom + i0 + k, bottom + i1 + k, wx, wy, o + k, VecF::kLanes);
      if (k < c) bilinear<true>(top + i0 + k, top + i1 + k, bottom + i0 + k, bottom + i1 + k, wx, wy, o + k, c - k);
    }
  }
}

MSV0_EXPORT(resize_f32)
}  // namespace MSV0_ISA
}  // namespace msv0

#else  // binding pass
#include <algorithm>
#include <optional>
#include <string>
#include <vector>
#include <pybind11/stl.h>

#include "runtime/native.h"

namespace msv0 {
namespace {

// Tables come as arrays, not std::vector: pybind11 would convert those element by element
// through Python objects (10 s for a 16M-row table).
using Int64s = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;
using Floats = py::array_t<float, py::array::c_style | py::array::forcecast>;

// A source table checked against the axis it indexes.
std::vector<int64_t> indices(const Int64s& t, size_t n, int64_t limit, const char* what) {
  if (t.ndim() != 1 || static_cast<size_t>(t.size()) != n)
    throw ArgError(std::string(what) + ": expected one entry per output position");
  std::vector<int64_t> v(t.data(), t.data() + n);
  for (int64_t i : v)
    if (i < 0 || i >= limit) throw ArgError(std::string(what) + ": index out of range");
  return v;
}

class Resize : public NativeOp {
 public:
  // Nearest when wy and wx are absent (y1, x1 are then unused).
  Resize(const std::vector<int64_t>& x_shape, const std::vector<int64_t>& y_shape, const Int64s& y0, const Int64s& x0,
         const std::optional<Int64s>& y1, const std::optional<Int64s>& x1, const std::optional<Floats>& wy,
         const std::optional<Floats>& wx, char type)
      : fn_(MSV0_DISPATCH(resize_f32)) {
    if (type != 'f' && type != 'b') throw ArgError("type must be 'f' (float32) or 'b' (int8)");
    const auto& x = checked_shape(x_shape, 4, "x_shape");
    const auto& y = checked_shape(y_shape, 4, "y_shape");
    if (y[0] != x[0] || y[3] != x[3]) throw ArgError("y_shape: expected the input's batch and channels");
    const bool nearest = !wy || !wx;
    const auto oh = static_cast<size_t>(y[1]), ow = static_cast<size_t>(y[2]);
    y0_ = indices(y0, oh, x[1], "y0");
    x0_ = indices(x0, ow, x[2], "x0");
    if (!nearest) {
      if (type != 'f') throw ArgError("type: bilinear takes float32 only");
      if (!y1 || !x1) throw ArgError("y1, x1: bilinear needs both");
      y1_ = indices(*y1, oh, x[1], "y1");
      x1_ = indices(*x1, ow, x[2], "x1");
      if (wy->ndim() != 1 || wx->ndim() != 1 || static_cast<size_t>(wy->size()) != oh ||
          static_cast<size_t>(wx->size()) != ow)
        throw ArgError("wy, wx: expected one weight per output position");
      wy_.assign(wy->data(), wy->data() + oh);
      wx_.assign(wx->data(), wx->data() + ow);
    }
    a_ = ResizeArgs{nullptr, nullptr, x[1], x[2], x[3], y[1], y[2], y0_.data(), y1_.data(), x0_.data(),
                    x1_.data(), wy_.data(), wx_.data(), nearest};
    a_.pixel_bytes = x[3] * (type == 'f' ? 4 : 1);
    rows_ = y[0] * y[1];
    set_operands({{x, type}}, {{y, type}});
  }

  void run(const void* const* in, void* const* out) const override {
    ResizeArgs a = a_;
    a.x = in[0];
    a.y = out[0];
    // Rows of at least ~4K output floats per chunk, so a chunk outweighs a thread hand-off.
    const int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(1, a.ow * a.c));
    parallel_for(rows_, grain, [&](int64_t r0, int64_t r1) { fn_(a, r0, r1); });
  }
  const char* name() const override { return a_.nearest ? "resize_nearest" : "resize_bilinear"; }

 private:
  ResizeFn fn_;
  std::vector<int64_t> y0_, y1_, x0_, x1_;
  std::vector<float> wy_, wx_;
  ResizeArgs a_;
  int64_t rows_ = 0;
};

}  // namespace

MSV0_BIND(m) {
  py::class_<Resize, NativeOp, std::shared_ptr<Resize>>(m, "Resize",
      "NHWC resize of x (x_shape) into y (y_shape) from source tables: nearest copies (y0, x0), of `type` 'f' "
      "(float32) or 'b' (int8); bilinear (wy, wx given; float32) blends rows y0/y1 and columns x0/x1, weighting "
      "y1/x1 by wy/wx.")
      .def(py::init<const std::vector<int64_t>&, const std::vector<int64_t>&, const Int64s&, const Int64s&,
                    const std::optional<Int64s>&, const std::optional<Int64s>&, const std::optional<Floats>&,
                    const std::optional<Floats>&, char>(),
           py::arg("x_shape"), py::arg("y_shape"), py::arg("y0"), py::arg("x0"), py::arg("y1") = py::none(),
           py::arg("x1") = py::none(), py::arg("wy") = py::none(), py::arg("wx") = py::none(), py::arg("type") = 'f');
}

}  // namespace msv0
#endif
