// An inverted-residual block as one step, NHWC float32: a 1x1 expand conv, a depthwise conv
// and optionally a 1x1 project conv, each with its bias and clamp:
//   e = clamp(x · We + be),  d = depthwise(e),  y = clamp(d · Wp + bp)   (y = d without project)
// The expanded tensor e is 6x wider than x and the largest of the block; written whole and read
// back by the next layer it makes both layers memory-bound. Here each thread walks its share
// of output rows in bands, and only the rows of e (and d) one band needs exist, in per-thread
// scratch that stays in L2. Rows of e shared by consecutive bands (the window's overlap) are
// kept, so each is computed once per thread. The products are the packed SGEMM's and the
// depthwise sums the depthwise kernel's (same results as the three layers run apart, up to
// float reassociation inside the SGEMM's k blocks, which are the same here). The block borrows
// the packed weights of the kernel objects it absorbs.
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
  SgemmFn expand_gemm, project_gemm;  // the slots that packed their B (fp32, bf16 or fp16)
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
      f.expand_gemm(g, 0, g.m, 0, panels_of(g.n));
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
      f.project_gemm(g, 0, g.m, 0, panels_of(g.n));
    }
    r += q1 - q0;
  }
}

MSV0_EXPORT(fused_block_f32)
}  // namespace MSV0_ISA
}  // namespace msv0

#else  // binding pass
#include <algorithm>
#include <vector>

#include "kernels/conv2d_f32.h"

namespace msv0 {
namespace {

// Floats of band scratch per thread aimed for: a quarter of a 1 MiB L2, so the band's
// expanded rows, its depthwise output and the weights' panels stay there between the steps.
constexpr int64_t kBandFloats = 64 * 1024;

class FusedBlock : public NativeOp {
 public:
  // expand: a gemm1x1 Conv2D object; dw: a depthwise one on its output; project: a gemm1x1
  // Conv2D object on dw's output, or null. max_band > 0 caps the rows per band below what the
  // scratch budget allows.
  FusedBlock(const NativeOp& expand, const NativeOp& dw, const NativeOp* project, int64_t max_band)
      : fn_(MSV0_DISPATCH(fused_block_f32)) {
    const PointwiseParts* e = pointwise_parts(expand);
    const DepthwiseParts* d = depthwise_parts(dw);
    const PointwiseParts* p = project ? pointwise_parts(*project) : nullptr;
    if (!e || !d || (project && !p)) throw ArgError("FusedBlock: expected gemm1x1, depthwise[, gemm1x1] Conv2D objects");
    if (expand.outputs()[0].shape != dw.inputs()[0].shape || (project && dw.outputs()[0].shape != project->inputs()[0].shape))
      throw ArgError("FusedBlock: each object must read the previous one's output");
    const DwArgs& da = d->args;
    if (da.h < 1 || da.w < 1) throw ArgError("FusedBlock: empty image");
    expand_ = e->b;
    dw_ = d->w;
    project_ = p ? p->b : nullptr;
    zeros_.assign(static_cast<size_t>(da.w * da.c), 0.f);
    const int64_t c = da.c, cin = expand_->k, cout = p ? project_->n : c;
    f_.x = nullptr;
    f_.y = nullptr;
    f_.expand = GemmArgs{nullptr, 0, expand_->w.data(), expand_->bias_or_null(), nullptr, 0, 0, c, cin, e->lo, e->hi};
    f_.dw = da;
    f_.dw.zeros = zeros_.data();
    f_.project = GemmArgs{nullptr, 0, p ? project_->w.data() : nullptr, p ? project_->bias_or_null() : nullptr,
                          nullptr, 0, 0, cout, c, p ? p->lo : 0.f, p ? p->hi : 0.f};
    f_.expand_gemm = expand_->gemm->fn;
    f_.project_gemm = p ? project_->gemm->fn : nullptr;
    f_.n = da.n;
    f_.h = da.h;
    f_.oh = da.oh;
    // The widest band whose scratch fits kBandFloats, at least one row.
    const int64_t row = da.w * c, out_row = p ? da.ow * c : 0;
    int64_t band = 1;
    while (band < da.oh && fused_expanded_rows(f_.dw, band + 1) * row + (band + 1) * out_row <= kBandFloats) ++band;
    f_.band = max_band > 0 ? std::min(band, max_band) : band;
    scratch_ = fused_expanded_rows(f_.dw, f_.band) * row + f_.band * out_row;
    set_operands({expand.inputs()[0]}, {(project ? project : &dw)->outputs()[0]});
  }

  void run(const void* const* in, void* const* out) const override {
    FusedArgs f = f_;
    f.x = static_cast<const float*>(in[0]);
    f.y = static_cast<float*>(out[0]);
    const int64_t threads = bound_threads(), rows = f.n * f.oh;
    // One contiguous share of rows per thread: every share recomputes the rows of e its first
    // band shares with the share before it.
    parallel_for(rows, (rows + threads - 1) / threads, [&](int64_t r0, int64_t r1) {
      fn_(f, r0, r1, thread_scratch(static_cast<size_t>(scratch_)));
    });
  }
  const char* name() const override { return "fused_block"; }
  int64_t band() const { return f_.band; }

 private:
  FusedBlockFn fn_;
  std::shared_ptr<const PackedB> expand_, project_;  // shared with the absorbed objects
  std::shared_ptr<const DwPacked> dw_;
  std::vector<float> zeros_;
  FusedArgs f_;
  int64_t scratch_ = 0;
};

}  // namespace

MSV0_BIND(m) {
  py::class_<FusedBlock, NativeOp, std::shared_ptr<FusedBlock>>(
      m, "FusedBlock", "1x1 expand conv -> depthwise conv [-> 1x1 project conv] in bands of output rows, "
      "reusing the packed weights of those Conv2D kernel objects.")
      .def(py::init([](std::shared_ptr<NativeOp> expand, std::shared_ptr<NativeOp> dw,
                       std::shared_ptr<NativeOp> project, int64_t max_band) {
             if (!expand || !dw) throw ArgError("FusedBlock: expand and dw are required");
             return std::make_shared<FusedBlock>(*expand, *dw, project.get(), max_band);
           }), py::arg("expand"), py::arg("dw"), py::arg("project"), py::arg("max_band") = 0)
      .def_property_readonly("band", &FusedBlock::band);
}

}  // namespace msv0
#endif
