// DeConv2D (transposed conv), NHWC float32 (format-v0.md §5). One SGEMM turns every input
// pixel into its kh x kw x oc contributions (col = x · W, W [c, kh*kw*oc] as stored), then a
// gather per output row sums the contributions that land on each output pixel of the cropped
// window starting at (pt, pl) (its taps listed per output row and column, transposed_window.h),
// adds the bias and clamps. Gathering instead of scattering lets output rows run in parallel with
// no write conflicts.
#include "kernels/gemm_f32.h"

#include "kernels/kernel.h"
#include "kernels/transposed_window.h"

namespace msv0 {

struct DeconvArgs {
  const float* col;  // n*h*w rows of kh*kw*oc floats, (ky, kx, o) order
  const float* bias;  // oc floats, or null
  float* y;           // n x oh x ow x oc
  int64_t n, h, w, oh, ow, oc, kh, kw;
  TapList rows, cols;  // the (tap, input index) pairs of each output row and column
  float lo, hi;
};

// Output rows [r0, r1) of the flattened (n, oh); output pixels no tap reaches get bias only.
using Deconv2dFn = void (*)(const DeconvArgs&, int64_t r0, int64_t r1);
MSV0_DECLARE(deconv2d_f32_col2im, Deconv2dFn)

}  // namespace msv0

#if !MSV0_ONCE
namespace msv0 {
namespace MSV0_ISA {
void deconv2d_f32_col2im(const DeconvArgs& a, int64_t r0, int64_t r1) {
  const int64_t oc = a.oc, ow = a.ow;
  const int64_t row_floats = a.kw * oc;  // one ky's slice of a col row
  const int64_t taps = row_floats * a.kh;  // a whole col row
  const int64_t* row_start = a.rows.start;
  const int64_t* col_start = a.cols.start;
  const int64_t* col_src = a.cols.src;
  const int64_t* col_tap = a.cols.tap;
  const VecF lo = VecF::splat(a.lo), hi = VecF::splat(a.hi);
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t b = r / a.oh, oy = r % a.oh;
    float* out = a.y + r * ow * oc;
    const int64_t j0 = row_start[oy], j1 = row_start[oy + 1];
    for (int64_t ox = 0; ox < ow; ++ox, out += oc) {
      const int64_t i0 = col_start[ox], i1 = col_start[ox + 1];
      for (int64_t c = 0; c < oc; c += VecF::kLanes) {
        const int64_t lanes = min_i(VecF::kLanes, oc - c);
        VecF acc = a.bias ? VecF::load_tail(a.bias + c, lanes) : VecF::zero();
        for (int64_t j = j0; j < j1; ++j) {
          const float* col_row = a.col + (b * a.h + a.rows.src[j]) * a.w * taps + a.rows.tap[j] * row_floats + c;
          for (int64_t i = i0; i < i1; ++i) acc = acc + VecF::load_tail(col_row + col_src[i] * taps + col_tap[i] * oc, lanes);
        }
        clamp(acc, lo, hi).store_tail(out + c, lanes);
      }
    }
  }
}

MSV0_EXPORT(deconv2d_f32_col2im)
}  // namespace MSV0_ISA
}  // namespace msv0

#else  // binding pass
#include <optional>
#include <string>
#include <vector>
#include <pybind11/stl.h>

#include "runtime/native.h"

namespace msv0 {
namespace {

// A DeConv2D whose weight [c, kh, kw, oc] is packed once as the GEMM's B (c x kh*kw*oc).
class Deconv2d : public NativeOp {
 public:
  Deconv2d(const py::array& weight, std::optional<py::array> bias, int64_t sh, int64_t sw, int64_t dh, int64_t dw,
           int64_t pt, int64_t pl, const std::vector<int64_t>& x_shape, const std::vector<int64_t>& y_shape,
           float lo, float hi)
      : gemm_(&sgemm_config()), fn_(MSV0_DISPATCH(deconv2d_f32_col2im)) {
    if (weight.ndim() != 4) throw ArgError("weight: expected [c, kh, kw, oc]");
    check_strides(sh, sw, dh, dw);
    const auto& x = checked_shape(x_shape, 4, "x_shape");
    const auto& y = checked_shape(y_shape, 4, "y_shape");
    const int64_t c = weight.shape(0), kh = weight.shape(1), kw = weight.shape(2), oc = weight.shape(3);
    if (x[3] != c) throw ArgError("x_shape: expected " + std::to_string(c) + " channels");
    if (y[0] != x[0] || y[3] != oc)
      throw ArgError("y_shape: expected batch " + std::to_string(x[0]) + " and " + std::to_string(oc) + " channels");
    if (bias) {
      expect_shape(*bias, {oc}, "bias");
      const float* pb = in_ptr<float>(*bias, "bias");
      bias_.assign(pb, pb + oc);
    }
    const int64_t cols = kh * kw * oc;
    b_ = pack_b(in_ptr<float>(weight, "weight"), cols, false, cols, c, nullptr);
    rows_ = TapTable(y[1], pt, kh, sh, dh, x[1]);
    cols_ = TapTable(y[2], pl, kw, sw, dw, x[2]);
    a_ = DeconvArgs{nullptr, bias_.empty() ? nullptr : bias_.data(), nullptr, x[0], x[1], x[2], y[1], y[2], oc, kh,
                    kw, rows_.list(), cols_.list(), lo, hi};
    set_operands({{x}}, {{y}});
  }

  void run(const void* const* in, void* const* out) const override {
    const int64_t pixels = a_.n * a_.h * a_.w, cols = b_->n;
    std::vector<float> col(static_cast<size_t>(pixels * cols));
    sgemm_run(*gemm_, GemmArgs{static_cast<const float*>(in[0]), b_->k, b_->w.data(), nullptr, col.data(), cols, pixels,
                       cols, b_->k, -INFINITY, INFINITY});
    DeconvArgs a = a_;
    a.col = col.data();
    a.y = static_cast<float*>(out[0]);
    parallel_for(a.n * a.oh, 1, [&](int64_t r0, int64_t r1) { fn_(a, r0, r1); });
  }
  const char* name() const override { return "deconv2d"; }

 private:
  const SgemmConfig* gemm_;
  Deconv2dFn fn_;
  std::shared_ptr<const PackedB> b_;
  TapTable rows_, cols_;
  std::vector<float> bias_;  // oc floats, added by the gather
  DeconvArgs a_;
};

}  // namespace

MSV0_BIND(m) {
  py::class_<Deconv2d, NativeOp, std::shared_ptr<Deconv2d>>(m, "Deconv2d",
      "NHWC float32 DeConv2D on x of x_shape into y of y_shape, its [c, kh, kw, oc] weight packed once.")
      .def(py::init<const py::array&, std::optional<py::array>, int64_t, int64_t, int64_t, int64_t, int64_t,
                    int64_t, const std::vector<int64_t>&, const std::vector<int64_t>&, float, float>(),
           py::arg("weight"), py::arg("bias"), py::arg("sh"), py::arg("sw"), py::arg("dh"), py::arg("dw"),
           py::arg("pt"), py::arg("pl"), py::arg("x_shape"), py::arg("y_shape"), py::arg("lo") = -INFINITY,
           py::arg("hi") = INFINITY);
}

}  // namespace msv0
#endif
