// An inverted-residual block as one step, NHWC float32: a 1x1 expand conv, a depthwise conv
// and optionally a 1x1 project conv, each with its bias and clamp:
//   e = clamp(x · We + be),  d = depthwise(e),  y = clamp(d · Wp + bp)   (y = d without project)
// The expanded tensor e is 6x wider than x and the largest of the block; written whole and read
// back by the next layer it makes both layers memory-bound. Here each thread walks its share
// of output rows in bands, and only the rows of e (and d) one band needs exist, in per-thread
// scratch that stays in L2. Rows of e shared by consecutive bands (the window's overlap) are
// kept, so each is computed once per thread. The products are the packed SGEMM's and the
// depthwise sums the depthwise kernel's (same results as the three layers run apart, up to
// float reassociation inside the SGEMM's k blocks, which are the same here).
#include "kernels/dwconv2d_f32.h"
#include "kernels/gemm_f32.h"

#include "kernels/kernel.h"

namespace msv0 {

struct FusedArgs {
  const float* x;  // n x h x w x cin
  float* y;        // n x oh x ow x cout (cout = c without the project conv)
  GemmArgs expand;   // b_packed, bias, n = c, k = cin, lo, hi; the rest is set per band
  DwArgs dw;         // weight, bias, zeros and geometry; x, y, n, h, oh, pt are set per band
  GemmArgs project;  // as expand (n = cout, k = c); b_packed null when there is none
  int64_t n, h, oh;
  int64_t band;  // output rows per band
};

// Rows the expanded buffer holds for one band: its window's input rows.
static int64_t fused_expanded_rows(const DwArgs& d, int64_t band) { return (band - 1) * d.sh + (d.kh - 1) * d.dh + 1; }

// Output rows [r0, r1) of the flattened (b, oy); scratch holds fused_expanded_rows * w * c
// floats, plus band * ow * c with a project conv.
using FusedBlockFn = void (*)(const FusedArgs&, int64_t r0, int64_t r1, float* scratch);
MSV0_DECLARE(fused_block_f32, FusedBlockFn)

}  // namespace msv0

#if !MSV0_ONCE
namespace msv0 {
namespace MSV0_ISA {
namespace {

int64_t panels_of(int64_t n) { return (n + kGemmNr - 1) / kGemmNr; }

// dst[0, n) = src[0, n) for dst < src: each vector is loaded before anything past it is stored.
void move_down(float* dst, const float* src, int64_t n) {
  int64_t i = 0;
  for (; i + VecF::kLanes <= n; i += VecF::kLanes) VecF::load(src + i).store(dst + i);
  if (i < n) VecF::load_tail(src + i, n - i).store_tail(dst + i, n - i);
}

}  // namespace

void fused_block_f32(const FusedArgs& f, int64_t r0, int64_t r1, float* scratch) {
  const DwArgs& d = f.dw;
  const int64_t row = d.w * d.c, cin = f.expand.k, span = (d.kh - 1) * d.dh + 1;
  const bool project = f.project.b_packed != nullptr;
  float* e = scratch;  // expanded rows [e0, e1) of image eb
  float* dout = scratch + fused_expanded_rows(d, f.band) * row;
  int64_t eb = -1, e0 = 0, e1 = 0;
  for (int64_t r = r0; r < r1;) {
    const int64_t b = r / f.oh, q0 = r % f.oh, q1 = min_i(f.oh, q0 + min_i(f.band, r1 - r));
    // The input rows this band's windows touch, clipped to the image (may be none).
    const int64_t n0 = min_i(f.h, max_i(0, q0 * d.sh - d.pt));
    const int64_t n1 = max_i(n0, min_i(f.h, (q1 - 1) * d.sh - d.pt + span));
    if (b != eb || n0 >= e1) {
      eb = b;
      e0 = e1 = n0;
    } else if (n0 > e0) {  // keep the overlap with the previous band
      move_down(e, e + (n0 - e0) * row, (e1 - n0) * row);
      e0 = n0;
    }
    if (n1 > e1) {
      GemmArgs g = f.expand;
      g.a = f.x + (b * f.h + e1) * d.w * cin;
      g.lda = cin;
      g.c = e + (e1 - e0) * row;
      g.ldc = d.c;
      g.m = (n1 - e1) * d.w;
      sgemm_f32(g, 0, g.m, 0, panels_of(g.n));
      e1 = n1;
    }
    DwArgs a = d;
    a.x = e;
    a.n = 1;
    a.h = e1 - e0;
    a.oh = q1 - q0;
    a.pt = d.pt + e0 - q0 * d.sh;  // >= 0: e0 is q0*sh - pt unless that lies above the image
    a.y = project ? dout : f.y + (b * f.oh + q0) * d.ow * d.c;
    dwconv2d_f32(a, 0, a.oh);
    if (project) {
      GemmArgs g = f.project;
      g.a = dout;
      g.lda = d.c;
      g.c = f.y + (b * f.oh + q0) * d.ow * g.n;
      g.ldc = g.n;
      g.m = a.oh * d.ow;
      sgemm_f32(g, 0, g.m, 0, panels_of(g.n));
    }
    r += q1 - q0;
  }
}

MSV0_EXPORT(fused_block_f32)
}  // namespace MSV0_ISA
}  // namespace msv0

#else  // binding pass
#include <algorithm>
#include <optional>
#include <vector>

#include <pybind11/stl.h>

#include "runtime/native.h"

namespace msv0 {
namespace {

// Floats of band scratch per thread aimed for: a quarter of a 1 MiB L2, so the band's
// expanded rows, its depthwise output and the weights' panels stay there between the steps.
constexpr int64_t kBandFloats = 64 * 1024;

class FusedBlockOp : public NativeOp {
 public:
  // expand_w [c, cin]; dw_w [c, kh, kw]; project_w [cout, c] or none; shapes fixed here.
  // max_band > 0 caps the rows per band below what the scratch budget allows.
  FusedBlockOp(const py::array& expand_w, std::optional<py::array> expand_b, float e_lo, float e_hi,
               const py::array& dw_w, std::optional<py::array> dw_b, int64_t sh, int64_t sw, int64_t dh, int64_t dw,
               int64_t pt, int64_t pl, float d_lo, float d_hi, std::optional<py::array> project_w,
               std::optional<py::array> project_b, float p_lo, float p_hi, int64_t n, int64_t h, int64_t w,
               int64_t oh, int64_t ow, int64_t max_band) {
    if (expand_w.ndim() != 2 || dw_w.ndim() != 3) throw ArgError("expand_w must be 2-D and dw_w 3-D");
    const int64_t c = expand_w.shape(0), cin = expand_w.shape(1), kh = dw_w.shape(1), kw = dw_w.shape(2);
    if (dw_w.shape(0) != c) throw ArgError("dw_w: channels differ from the expand conv's");
    if (sh < 1 || sw < 1 || dh < 1 || dw < 1 || pt < 0 || pl < 0 || kh < 1 || kw < 1)
      throw ArgError("bad depthwise geometry");
    if (n < 0 || h < 1 || w < 1 || oh < 0 || ow < 0) throw ArgError("bad shapes");
    expand_ = pack(expand_w, expand_b, c, cin);
    const int64_t cp = (c + kDwPad - 1) / kDwPad * kDwPad;
    dw_w_.resize(static_cast<size_t>(kh * kw * cp));
    dw_b_.resize(static_cast<size_t>(cp));
    if (dw_b) expect_shape(*dw_b, {c}, "dw_b");
    dw_pack(in_ptr<float>(dw_w, "dw_w"), dw_b ? in_ptr<float>(*dw_b, "dw_b") : nullptr, c, kh * kw, dw_w_.data(),
            dw_b_.data());
    zeros_.assign(static_cast<size_t>(w * c), 0.f);
    int64_t cout = c;
    if (project_w) {
      if (project_w->ndim() != 2 || project_w->shape(1) != c) throw ArgError("project_w: expected [cout, c]");
      cout = project_w->shape(0);
      project_ = pack(*project_w, project_b, cout, c);
    }
    f_.x = nullptr;
    f_.y = nullptr;
    f_.expand = GemmArgs{nullptr, 0, expand_.w.data(), bias_of(expand_), nullptr, 0, 0, c, cin, e_lo, e_hi};
    f_.dw = DwArgs{nullptr, nullptr, dw_w_.data(), dw_b_.data(), zeros_.data(), n, h, w, c, oh, ow, cp,
                   kh, kw, sh, sw, dh, dw, pt, pl, d_lo, d_hi};
    f_.project = GemmArgs{nullptr, 0, project_w ? project_.w.data() : nullptr, bias_of(project_), nullptr, 0, 0,
                          cout, c, p_lo, p_hi};
    f_.n = n;
    f_.h = h;
    f_.oh = oh;
    // The widest band whose scratch fits kBandFloats, at least one row.
    const int64_t row = w * c, out_row = project_w ? ow * c : 0;
    int64_t band = 1;
    while (band < oh && fused_expanded_rows(f_.dw, band + 1) * row + (band + 1) * out_row <= kBandFloats) ++band;
    f_.band = max_band > 0 ? std::min(band, max_band) : band;
    scratch_ = fused_expanded_rows(f_.dw, f_.band) * row + f_.band * out_row;
    x_shape_ = {n, h, w, cin};
    y_shape_ = {n, oh, ow, cout};
  }

  void run(const void* const* in, void* const* out) const override {
    FusedArgs f = f_;
    f.x = static_cast<const float*>(in[0]);
    f.y = static_cast<float*>(out[0]);
    const FusedBlockFn fn = MSV0_DISPATCH(fused_block_f32);
    const ThreadPool* pool = bound_pool();
    const int64_t threads = pool ? pool->size() : 1, rows = f.n * f.oh;
    // One contiguous share of rows per thread: every share recomputes the rows of e its first
    // band shares with the share before it.
    parallel_for(rows, (rows + threads - 1) / threads, [&](int64_t r0, int64_t r1) {
      fn(f, r0, r1, thread_scratch(static_cast<size_t>(scratch_)));
    });
  }

  void run_arrays(const py::array& x, py::array& y) const {
    expect_shape(x, x_shape_, "x");
    expect_shape(y, y_shape_, "y");
    const void* in[1] = {in_ptr<float>(x, "x")};
    void* out[1] = {out_ptr<float>(y, "y")};
    py::gil_scoped_release unlocked;
    run(in, out);
  }

  int64_t band() const { return f_.band; }

 private:
  struct Packed {
    std::vector<float> w, bias;
  };

  // weight [n, k] is B^T of the 1x1 conv's GEMM.
  static Packed pack(const py::array& weight, const std::optional<py::array>& bias, int64_t n, int64_t k) {
    Packed p;
    p.w.resize(static_cast<size_t>(sgemm_packed_size(n, k)));
    sgemm_pack_b(in_ptr<float>(weight, "weight"), k, true, n, k, p.w.data());
    if (bias) {
      expect_shape(*bias, {n}, "bias");
      const float* pb = in_ptr<float>(*bias, "bias");
      p.bias.assign(pb, pb + n);
    }
    return p;
  }

  static const float* bias_of(const Packed& p) { return p.bias.empty() ? nullptr : p.bias.data(); }

  Packed expand_, project_;
  std::vector<float> dw_w_, dw_b_, zeros_;
  FusedArgs f_;
  int64_t scratch_ = 0;
  std::vector<int64_t> x_shape_, y_shape_;
};

}  // namespace

MSV0_BIND(m) {
  py::class_<FusedBlockOp, NativeOp, std::shared_ptr<FusedBlockOp>>(
      m, "FusedBlock", "1x1 expand conv -> depthwise conv [-> 1x1 project conv] in bands of output rows.")
      .def(py::init<const py::array&, std::optional<py::array>, float, float, const py::array&,
                    std::optional<py::array>, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, float, float,
                    std::optional<py::array>, std::optional<py::array>, float, float, int64_t, int64_t, int64_t,
                    int64_t, int64_t, int64_t>(),
           py::arg("expand_w"), py::arg("expand_b"), py::arg("e_lo"), py::arg("e_hi"), py::arg("dw_w"),
           py::arg("dw_b"), py::arg("sh"), py::arg("sw"), py::arg("dh"), py::arg("dw"), py::arg("pt"), py::arg("pl"),
           py::arg("d_lo"), py::arg("d_hi"), py::arg("project_w"), py::arg("project_b"), py::arg("p_lo"),
           py::arg("p_hi"), py::arg("n"), py::arg("h"), py::arg("w"), py::arg("oh"), py::arg("ow"),
           py::arg("max_band") = 0)
      .def("run", &FusedBlockOp::run_arrays, py::arg("x"), py::arg("y"))
      .def_property_readonly("band", &FusedBlockOp::band);
}

}  // namespace msv0
#endif
