// DeConv2D (transposed conv), NHWC float32 (format-v0.md §5). One SGEMM turns every input
// pixel into its kh x kw x oc contributions (col = x · W, W [c, kh*kw*oc] as stored), then a
// gather per output row sums the contributions that land on each output pixel of the cropped
// window starting at (pt, pl), adds the bias and clamps. Gathering instead of scattering lets
// output rows run in parallel with no write conflicts.
#include "kernels/gemm_f32.h"

#include "kernels/kernel.h"

namespace msv0 {

struct DeconvArgs {
  const float* col;  // n*h*w rows of kh*kw*oc floats, (ky, kx, o) order
  const float* bias;  // oc floats, or null
  float* y;           // n x oh x ow x oc
  int64_t n, h, w, oh, ow, oc;
  int64_t kh, kw, sh, sw, dh, dw, pt, pl;
  float lo, hi;
};

// Output rows [r0, r1) of the flattened (n, oh). pt/pl may be negative (SAME_UPPER with a
// stride wider than the dilated kernel); output pixels no tap reaches get bias only.
using Deconv2dFn = void (*)(const DeconvArgs&, int64_t r0, int64_t r1);
MSV0_DECLARE(deconv2d_f32_col2im, Deconv2dFn)

}  // namespace msv0

#if !MSV0_ONCE
namespace msv0 {
namespace MSV0_ISA {
namespace {

// The input index i and tap t with i*s + t*d == pos (pos in full-output coordinates).
bool source(int64_t pos, int64_t t, int64_t s, int64_t d, int64_t n, int64_t* i) {
  const int64_t q = pos - t * d;
  if (q < 0 || q % s) return false;
  *i = q / s;
  return *i < n;
}

}  // namespace

void deconv2d_f32_col2im(const DeconvArgs& a, int64_t r0, int64_t r1) {
  const int64_t taps = a.kh * a.kw * a.oc;
  const VecF lo = VecF::splat(a.lo), hi = VecF::splat(a.hi);
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t b = r / a.oh, oy = r % a.oh;
    for (int64_t ox = 0; ox < a.ow; ++ox) {
      float* out = a.y + (r * a.ow + ox) * a.oc;
      for (int64_t c = 0; c < a.oc; c += VecF::kLanes) {
        const int64_t lanes = min_i(VecF::kLanes, a.oc - c);
        VecF acc = a.bias ? VecF::load_tail(a.bias + c, lanes) : VecF::zero();
        for (int64_t ky = 0; ky < a.kh; ++ky) {
          int64_t iy;
          if (!source(oy + a.pt, ky, a.sh, a.dh, a.h, &iy)) continue;
          for (int64_t kx = 0; kx < a.kw; ++kx) {
            int64_t ix;
            if (!source(ox + a.pl, kx, a.sw, a.dw, a.w, &ix)) continue;
            const float* src = a.col + ((b * a.h + iy) * a.w + ix) * taps + (ky * a.kw + kx) * a.oc + c;
            acc = acc + VecF::load_tail(src, lanes);
          }
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
#include <vector>
#include <pybind11/stl.h>

#include "runtime/native.h"

namespace msv0 {

// A DeConv2D whose weight [c, kh, kw, oc] is packed once as the GEMM's B (c x kh*kw*oc).
class Deconv2dF32 {
 public:
  Deconv2dF32(const py::array& weight, std::optional<py::array> bias, int64_t sh, int64_t sw, int64_t dh,
              int64_t dw, int64_t pt, int64_t pl)
      : sh_(sh), sw_(sw), dh_(dh), dw_(dw), pt_(pt), pl_(pl) {
    if (weight.ndim() != 4) throw ArgError("weight: expected [c, kh, kw, oc]");
    check_strides(sh, sw, dh, dw);
    const float* pw = in_ptr<float>(weight, "weight");
    c_ = weight.shape(0);
    kh_ = weight.shape(1);
    kw_ = weight.shape(2);
    oc_ = weight.shape(3);
    const int64_t cols = kh_ * kw_ * oc_;
    packed_.resize(static_cast<size_t>(sgemm_packed_size(cols, c_)));
    sgemm_pack_b(pw, cols, false, cols, c_, packed_.data());
    if (bias) {
      expect_shape(*bias, {oc_}, "bias");
      const float* pb = in_ptr<float>(*bias, "bias");
      bias_.assign(pb, pb + oc_);
    }
  }

  void run(const py::array& x, py::array& y, float lo, float hi) const {
    if (x.ndim() != 4 || x.shape(3) != c_) throw ArgError("x: expected NHWC with " + std::to_string(c_) + " channels");
    if (y.ndim() != 4 || y.shape(0) != x.shape(0) || y.shape(3) != oc_)
      throw ArgError("y: expected NHWC with batch " + std::to_string(x.shape(0)) + " and " +
                     std::to_string(oc_) + " channels");
    const float* px = in_ptr<float>(x, "x");
    float* py_ = out_ptr<float>(y, "y");
    py::gil_scoped_release unlocked;
    execute(px, py_, x.shape(0), x.shape(1), x.shape(2), y.shape(1), y.shape(2), lo, hi);
  }

  // x: n x h x w x c, y: n x oh x ow x oc. Runs over the bound pool; the GIL must be released.
  void execute(const float* x, float* y, int64_t n, int64_t h, int64_t w, int64_t oh, int64_t ow, float lo,
               float hi) const {
    const int64_t pixels = n * h * w, cols = kh_ * kw_ * oc_;
    const Deconv2dFn fn = MSV0_DISPATCH(deconv2d_f32_col2im);
    std::vector<float> col(static_cast<size_t>(pixels * cols));
    sgemm_run(GemmArgs{x, c_, packed_.data(), nullptr, col.data(), cols, pixels, cols, c_, -INFINITY, INFINITY});
    const DeconvArgs a{col.data(), bias_.empty() ? nullptr : bias_.data(), y, n, h, w, oh, ow, oc_,
                       kh_, kw_, sh_, sw_, dh_, dw_, pt_, pl_, lo, hi};
    parallel_for(a.n * a.oh, 1, [&](int64_t r0, int64_t r1) { fn(a, r0, r1); });
  }

  int64_t channels() const { return c_; }
  int64_t out_channels() const { return oc_; }

 private:
  int64_t sh_, sw_, dh_, dw_, pt_, pl_;
  int64_t c_ = 0, kh_ = 0, kw_ = 0, oc_ = 0;
  std::vector<float> packed_, bias_;
};

// A DeConv2D on raw buffers with its input and output sizes fixed at plan time, for a Program.
class Deconv2dOp : public NativeOp {
 public:
  Deconv2dOp(std::shared_ptr<const Deconv2dF32> d, int64_t n, int64_t h, int64_t w, int64_t oh, int64_t ow, float lo,
             float hi)
      : d_(std::move(d)), n_(n), h_(h), w_(w), oh_(oh), ow_(ow), lo_(lo), hi_(hi) {}
  void run(const void* const* in, void* const* out) const override {
    d_->execute(static_cast<const float*>(in[0]), static_cast<float*>(out[0]), n_, h_, w_, oh_, ow_, lo_, hi_);
  }

 private:
  std::shared_ptr<const Deconv2dF32> d_;
  int64_t n_, h_, w_, oh_, ow_;
  float lo_, hi_;
};

MSV0_BIND(m) {
  py::class_<Deconv2dOp, NativeOp, std::shared_ptr<Deconv2dOp>>(m, "Deconv2dOp");
  py::class_<Deconv2dF32, std::shared_ptr<Deconv2dF32>>(m, "Deconv2dF32",
                          "NHWC float32 DeConv2D with its [c, kh, kw, oc] weight packed once; run(x, y, lo, hi).")
      .def(py::init<const py::array&, std::optional<py::array>, int64_t, int64_t, int64_t, int64_t, int64_t,
                    int64_t>(),
           py::arg("weight"), py::arg("bias"), py::arg("sh"), py::arg("sw"), py::arg("dh"), py::arg("dw"),
           py::arg("pt"), py::arg("pl"))
      .def("run", &Deconv2dF32::run, py::arg("x"), py::arg("y"), py::arg("lo") = -INFINITY,
           py::arg("hi") = INFINITY)
      .def("native", [](std::shared_ptr<Deconv2dF32> d, const std::vector<int64_t>& x_shape,
                        const std::vector<int64_t>& y_shape, float lo, float hi) {
             if (x_shape.size() != 4 || y_shape.size() != 4 || x_shape[3] != d->channels() ||
                 y_shape[0] != x_shape[0] || y_shape[3] != d->out_channels())
               throw ArgError("native: x/y shapes do not fit this DeConv2D");
             for (int64_t v : x_shape) if (v < 0) throw ArgError("native: negative dim");
             for (int64_t v : y_shape) if (v < 0) throw ArgError("native: negative dim");
             return std::shared_ptr<NativeOp>(std::make_shared<Deconv2dOp>(
                 std::move(d), x_shape[0], x_shape[1], x_shape[2], y_shape[1], y_shape[2], lo, hi));
           }, py::arg("x_shape"), py::arg("y_shape"), py::arg("lo") = -INFINITY, py::arg("hi") = INFINITY,
           "A NativeOp running this deconv from an NHWC x_shape into y_shape.");
}

}  // namespace msv0
#endif
