// Conv2D, NHWC float32 (format-v0.md §5): y = clamp(conv(x, W) + bias, lo, hi), grouped.
// Each tile of output pixels is gathered (im2col) into a per-thread buffer, one row per pixel
// in the weight's (kh, kw, c) order, and multiplied by the packed weight of its group; bias and
// the activation clamp run in the SGEMM epilogue. A 1x1 stride-1 unpadded conv skips the
// gather: the NHWC rows of x already are the GEMM's A.
#include "kernels/gemm_f32.h"

#include "kernels/kernel.h"

namespace msv0 {

struct ConvArgs {
  const float* x;         // n x h x w x c
  float* y;               // n x oh x ow x oc
  const float* w_packed;  // group blocks of sgemm_packed_size(og, kh*kw*cg) floats
  int64_t w_group_stride;
  const float* bias;  // oc floats, or null
  int64_t n, h, w, c, oh, ow, oc, group;
  int64_t kh, kw, sh, sw, dh, dw, pt, pl;
  float lo, hi;
};

// Output pixels [p0, p1) of the flattened (n, oh, ow); buf holds (p1 - p0) * kh*kw*c/group
// floats (unused by the 1x1 path). Reads of x are bounds-checked per tap, so any oh/ow is safe.
using Conv2dFn = void (*)(const ConvArgs&, int64_t p0, int64_t p1, float* buf);
MSV0_DECLARE(conv2d_f32, Conv2dFn)

}  // namespace msv0

#if !MSV0_ONCE
namespace msv0 {
namespace MSV0_ISA {
namespace {

void copy_floats(float* dst, const float* src, int64_t n) {
  int64_t i = 0;
  for (; i + VecF::kLanes <= n; i += VecF::kLanes) VecF::load(src + i).store(dst + i);
  if (i < n) VecF::load_tail(src + i, n - i).store_tail(dst + i, n - i);
}

void zero_floats(float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + VecF::kLanes <= n; i += VecF::kLanes) VecF::zero().store(dst + i);
  if (i < n) VecF::zero().store_tail(dst + i, n - i);
}

// One im2col row: the kh x kw window of output pixel (b, oy, ox), channels [c0, c0 + cg);
// taps in the padding are zeros.
void gather_row(const ConvArgs& a, int64_t b, int64_t oy, int64_t ox, int64_t c0, int64_t cg, float* dst) {
  const int64_t ix0 = ox * a.sw - a.pl;
  // With dilation 1 and all kw taps inside the image, one group's window row is one
  // contiguous run of x only when the group spans every channel.
  const bool row_run = a.dw == 1 && cg == a.c && ix0 >= 0 && ix0 + a.kw <= a.w;
  for (int64_t ky = 0; ky < a.kh; ++ky, dst += a.kw * cg) {
    const int64_t iy = oy * a.sh - a.pt + ky * a.dh;
    if (iy < 0 || iy >= a.h) {
      zero_floats(dst, a.kw * cg);
      continue;
    }
    const float* src = a.x + ((b * a.h + iy) * a.w) * a.c + c0;
    if (row_run) {
      copy_floats(dst, src + ix0 * a.c, a.kw * cg);
      continue;
    }
    for (int64_t kx = 0; kx < a.kw; ++kx) {
      const int64_t ix = ix0 + kx * a.dw;
      if (ix < 0 || ix >= a.w)
        zero_floats(dst + kx * cg, cg);
      else
        copy_floats(dst + kx * cg, src + ix * a.c, cg);
    }
  }
}

}  // namespace

void conv2d_f32(const ConvArgs& a, int64_t p0, int64_t p1, float* buf) {
  const int64_t cg = a.c / a.group, og = a.oc / a.group, k = a.kh * a.kw * cg;
  const int64_t panels = (og + kGemmNr - 1) / kGemmNr;
  const bool direct = a.kh == 1 && a.kw == 1 && a.sh == 1 && a.sw == 1 && a.pt == 0 && a.pl == 0 &&
                      a.oh == a.h && a.ow == a.w;
  const int64_t plane = a.oh * a.ow;
  for (int64_t g = 0; g < a.group; ++g) {
    const float* src = a.x + p0 * a.c + g * cg;
    int64_t lda = a.c;
    if (!direct) {
      float* row = buf;
      for (int64_t p = p0; p < p1; ++p, row += k) {
        const int64_t b = p / plane, r = p % plane;
        gather_row(a, b, r / a.ow, r % a.ow, g * cg, cg, row);
      }
      src = buf;
      lda = k;
    }
    const GemmArgs ga{src,          lda,   a.w_packed + g * a.w_group_stride, a.bias ? a.bias + g * og : nullptr,
                      a.y + p0 * a.oc + g * og, a.oc, p1 - p0, og, k, a.lo, a.hi};
    sgemm_f32(ga, 0, p1 - p0, 0, panels);
  }
}

MSV0_EXPORT(conv2d_f32)
}  // namespace MSV0_ISA
}  // namespace msv0

#else  // binding pass
#include <algorithm>
#include <optional>
#include <vector>
#include <pybind11/stl.h>

namespace msv0 {

// A Conv2D whose weight [oc, kh, kw, c/group] ("KHWC") is packed once per Session: group g's
// rows form B^T (og x kh*kw*cg) of its GEMM.
class Conv2dF32 {
 public:
  Conv2dF32(const py::array& weight, std::optional<py::array> bias, int64_t group, int64_t sh, int64_t sw,
            int64_t dh, int64_t dw, int64_t pt, int64_t pl)
      : group_(group), sh_(sh), sw_(sw), dh_(dh), dw_(dw), pt_(pt), pl_(pl) {
    if (weight.ndim() != 4) throw ArgError("weight: expected [oc, kh, kw, c/group]");
    if (group < 1 || sh < 1 || sw < 1 || dh < 1 || dw < 1) throw ArgError("group, strides and dilations must be >= 1");
    const float* pw = in_ptr<float>(weight, "weight");
    oc_ = weight.shape(0);
    kh_ = weight.shape(1);
    kw_ = weight.shape(2);
    cg_ = weight.shape(3);
    if (oc_ % group) throw ArgError("weight: output channels not divisible by group");
    const int64_t og = oc_ / group, k = kh_ * kw_ * cg_;
    group_stride_ = sgemm_packed_size(og, k);
    packed_.resize(static_cast<size_t>(group_stride_ * group));
    for (int64_t g = 0; g < group; ++g)
      sgemm_pack_b(pw + g * og * k, k, true, og, k, packed_.data() + g * group_stride_);
    if (bias) {
      expect_shape(*bias, {oc_}, "bias");
      const float* pb = in_ptr<float>(*bias, "bias");
      bias_.assign(pb, pb + oc_);
    }
  }

  // x: n x h x w x (group*cg); y: n x oh x ow x oc, written fully.
  void run(const py::array& x, py::array& y, float lo, float hi) const {
    if (x.ndim() != 4 || x.shape(3) != cg_ * group_)
      throw ArgError("x: expected NHWC with " + std::to_string(cg_ * group_) + " channels");
    if (y.ndim() != 4 || y.shape(0) != x.shape(0) || y.shape(3) != oc_)
      throw ArgError("y: expected NHWC with batch " + std::to_string(x.shape(0)) + " and " +
                     std::to_string(oc_) + " channels");
    ConvArgs a{in_ptr<float>(x, "x"), out_ptr<float>(y, "y"), packed_.data(), group_stride_,
               bias_.empty() ? nullptr : bias_.data(), x.shape(0), x.shape(1), x.shape(2), x.shape(3),
               y.shape(1), y.shape(2), oc_, group_, kh_, kw_, sh_, sw_, dh_, dw_, pt_, pl_, lo, hi};
    const int64_t pixels = a.n * a.oh * a.ow, k = kh_ * kw_ * cg_;
    // A tile of ~64 KiB of gathered rows stays in L2 while every panel of B passes over it;
    // whole 12-row groups keep the micro-kernel on its widest tile on every ISA.
    const int64_t rows = max_rows(k);
    const int64_t tiles = (pixels + rows - 1) / rows;
    const Conv2dFn fn = MSV0_DISPATCH(conv2d_f32);
    py::gil_scoped_release unlocked;
    parallel_for(tiles, 1, [&](int64_t t0, int64_t t1) {
      std::vector<float> buf(static_cast<size_t>(rows * k));
      for (int64_t t = t0; t < t1; ++t) fn(a, t * rows, std::min(pixels, t * rows + rows), buf.data());
    });
  }

 private:
  static int64_t max_rows(int64_t k) {
    const int64_t rows = (16384 / std::max<int64_t>(k, 1)) / 12 * 12;
    return std::min<int64_t>(std::max<int64_t>(rows, 12), 240);
  }

  int64_t group_, sh_, sw_, dh_, dw_, pt_, pl_;
  int64_t oc_ = 0, kh_ = 0, kw_ = 0, cg_ = 0, group_stride_ = 0;
  std::vector<float> packed_, bias_;
};

MSV0_BIND(m) {
  py::class_<Conv2dF32>(m, "Conv2dF32",
                        "NHWC float32 Conv2D with its KHWC weight packed once; run(x, y, lo, hi).")
      .def(py::init<const py::array&, std::optional<py::array>, int64_t, int64_t, int64_t, int64_t, int64_t,
                    int64_t, int64_t>(),
           py::arg("weight"), py::arg("bias"), py::arg("group"), py::arg("sh"), py::arg("sw"), py::arg("dh"),
           py::arg("dw"), py::arg("pt"), py::arg("pl"))
      .def("run", &Conv2dF32::run, py::arg("x"), py::arg("y"), py::arg("lo") = -INFINITY,
           py::arg("hi") = INFINITY);
}

}  // namespace msv0
#endif
