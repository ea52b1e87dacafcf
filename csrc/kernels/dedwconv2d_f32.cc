// DeDepthwiseConv2D (transposed depthwise conv), NHWC float32 (format-v0.md §5). Each output
// pixel gathers the taps that land on it (listed per output row and column, transposed_window.h).
// Channels are the vector lanes; gathering instead of scattering lets output rows run in
// parallel with no write conflicts.
#include "kernels/kernel.h"
#include "kernels/transposed_window.h"

namespace msv0 {

struct DedwArgs {
  const float* x;     // n x h x w x c
  const float* w;     // kh x kw x c
  const float* bias;  // c floats
  float* y;           // n x oh x ow x c
  int64_t n, h, w_in, c, oh, ow, kw;
  TapList rows, cols;  // the (tap, input index) pairs of each output row and column
  float lo, hi;
};

// Output rows [r0, r1) of the flattened (n, oh); output pixels no tap reaches get the bias only.
using DedwFn = void (*)(const DedwArgs&, int64_t r0, int64_t r1);
MSV0_DECLARE(dedwconv2d_f32, DedwFn)

}  // namespace msv0

#if !MSV0_ONCE
namespace msv0 {
namespace MSV0_ISA {
namespace {

// Channels [c, c + lanes) of one output pixel: taps summed in (ky, kx) order from 0, then the bias.
template <bool Tail>
void pixel(const DedwArgs& a, int64_t b, int64_t oy, int64_t ox, int64_t c, int64_t lanes, float* out) {
  VecF acc = VecF::zero();
  const TapList& rows = a.rows;
  const TapList& cols = a.cols;
  for (int64_t j = rows.start[oy]; j < rows.start[oy + 1]; ++j) {
    const float* x_row = a.x + (b * a.h + rows.src[j]) * a.w_in * a.c + c;
    const float* w_row = a.w + rows.tap[j] * a.kw * a.c + c;
    for (int64_t i = cols.start[ox]; i < cols.start[ox + 1]; ++i)
      acc = fmadd(load_n<Tail>(x_row + cols.src[i] * a.c, lanes), load_n<Tail>(w_row + cols.tap[i] * a.c, lanes), acc);
  }
  acc = acc + load_n<Tail>(a.bias + c, lanes);
  store_n<Tail>(clamp(acc, VecF::splat(a.lo), VecF::splat(a.hi)), out + c, lanes);
}

}  // namespace

void dedwconv2d_f32(const DedwArgs& a, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t b = r / a.oh, oy = r % a.oh;
    for (int64_t ox = 0; ox < a.ow; ++ox) {
      float* out = a.y + (r * a.ow + ox) * a.c;
      int64_t c = 0;
      for (; c + VecF::kLanes <= a.c; c += VecF::kLanes) pixel<false>(a, b, oy, ox, c, VecF::kLanes, out);
      if (c < a.c) pixel<true>(a, b, oy, ox, c, a.c - c, out);
    }
  }
}

MSV0_EXPORT(dedwconv2d_f32)
}  // namespace MSV0_ISA
}  // namespace msv0

#else  // binding pass
#include <algorithm>
#include <optional>
#include <string>
#include <vector>
#include <pybind11/stl.h>

#include "runtime/native.h"
#include "runtime/weight_memory.h"

namespace msv0 {
namespace {

// A DeDepthwiseConv2D whose weight [c, kh, kw] is packed once as [kh, kw, c].
class Dedwconv2d : public NativeOp {
 public:
  Dedwconv2d(const py::array& weight, std::optional<py::array> bias, int64_t sh, int64_t sw, int64_t dh, int64_t dw,
             int64_t pt, int64_t pl, const std::vector<int64_t>& x_shape, const std::vector<int64_t>& y_shape,
             float lo, float hi)
      : fn_(MSV0_DISPATCH(dedwconv2d_f32)) {
    if (weight.ndim() != 3) throw ArgError("weight: expected [c, kh, kw]");
    check_strides(sh, sw, dh, dw);
    const auto& x = checked_shape(x_shape, 4, "x_shape");
    const auto& y = checked_shape(y_shape, 4, "y_shape");
    const int64_t c = weight.shape(0), kh = weight.shape(1), kw = weight.shape(2);
    if (x[3] != c) throw ArgError("x_shape: expected " + std::to_string(c) + " channels");
    if (y[0] != x[0] || y[3] != c)
      throw ArgError("y_shape: expected batch " + std::to_string(x[0]) + " and " + std::to_string(c) + " channels");
    const float* pw = in_ptr<float>(weight, "weight");
    w_.resize(static_cast<size_t>(kh * kw * c));
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t t = 0; t < kh * kw; ++t) w_[t * c + ch] = pw[ch * kh * kw + t];
    bias_.assign(static_cast<size_t>(c), 0.f);
    if (bias) {
      expect_shape(*bias, {c}, "bias");
      const float* pb = in_ptr<float>(*bias, "bias");
      bias_.assign(pb, pb + c);
    }
    rows_ = TapTable(y[1], pt, kh, sh, dh, x[1]);
    cols_ = TapTable(y[2], pl, kw, sw, dw, x[2]);
    a_ = DedwArgs{nullptr, w_.data(), bias_.data(), nullptr, x[0], x[1], x[2], c, y[1], y[2], kw,
                  rows_.list(), cols_.list(), lo, hi};
    set_operands({{x}}, {{y}});
  }

  void run(const void* const* in, void* const* out) const override {
    DedwArgs a = a_;
    a.x = static_cast<const float*>(in[0]);
    a.y = static_cast<float*>(out[0]);
    // Rows of at least ~4K output floats per chunk, so a chunk outweighs a thread hand-off.
    const int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(1, a.ow * a.c));
    parallel_for(a.n * a.oh, grain, [&](int64_t r0, int64_t r1) { fn_(a, r0, r1); });
  }
  const char* name() const override { return "dedwconv2d"; }

 private:
  DedwFn fn_;
  TapTable rows_, cols_;
  WeightVector<float> w_;
  std::vector<float> bias_;
  DedwArgs a_;
};

}  // namespace

MSV0_BIND(m) {
  py::class_<Dedwconv2d, NativeOp, std::shared_ptr<Dedwconv2d>>(m, "Dedwconv2d",
      "NHWC float32 DeDepthwiseConv2D on x of x_shape into y of y_shape, its [c, kh, kw] weight packed once.")
      .def(py::init<const py::array&, std::optional<py::array>, int64_t, int64_t, int64_t, int64_t, int64_t,
                    int64_t, const std::vector<int64_t>&, const std::vector<int64_t>&, float, float>(),
           py::arg("weight"), py::arg("bias"), py::arg("sh"), py::arg("sw"), py::arg("dh"), py::arg("dw"),
           py::arg("pt"), py::arg("pl"), py::arg("x_shape"), py::arg("y_shape"), py::arg("lo") = -INFINITY,
           py::arg("hi") = INFINITY);
}

}  // namespace msv0
#endif
