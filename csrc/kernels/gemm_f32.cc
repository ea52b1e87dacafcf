// Packed SGEMM (see gemm_f32.h). The micro-kernel keeps a kMr x 16 tile of C in registers
// and streams one 16-wide panel row of B per k step, broadcasting A; k is blocked so a B
// panel slice and a tile of A stay in L1 across the panel loop.
#include "kernels/gemm_f32.h"

#include "kernels/kernel.h"

namespace msv0 {
MSV0_DECLARE(sgemm_f32, SgemmFn)
}  // namespace msv0

#if !MSV0_ONCE
namespace msv0 {
namespace MSV0_ISA {
namespace {

constexpr int kNv = static_cast<int>(kGemmNr) / VecF::kLanes;  // vectors per panel row
// Rows per tile: as many accumulators as the register file holds beside B and A operands.
constexpr int kMr = VecF::kLanes >= 16 ? 12 : VecF::kLanes == 8 ? 6 : VecF::kLanes == 4 ? 6 : 4;
constexpr int64_t kKc = 256;     // k block: a panel slice is 16 KiB
constexpr int64_t kPanels = 16;  // panels per block: 256 KiB of B stays in L2 across row tiles

template <int R>
void tile(const GemmArgs& g, int64_t i, int64_t p, int64_t k0, int64_t kc) {
  const bool first = k0 == 0, last = k0 + kc == g.k;
  const int64_t col = p * kGemmNr, cols = min_i(kGemmNr, g.n - col);
  VecF acc[R][kNv];
  for (int r = 0; r < R; ++r) {
    float* c = g.c + (i + r) * g.ldc + col;
    for (int v = 0; v < kNv; ++v) {
      const int64_t left = cols - v * VecF::kLanes;
      if (first)
        acc[r][v] = VecF::zero();
      else
        acc[r][v] = left >= VecF::kLanes ? VecF::load(c + v * VecF::kLanes)
                    : left > 0           ? VecF::load_tail(c + v * VecF::kLanes, left)
                                         : VecF::zero();
    }
  }
  const float* b = g.b_packed + (p * g.k + k0) * kGemmNr;
  const float* a = g.a + i * g.lda + k0;
  for (int64_t kk = 0; kk < kc; ++kk, b += kGemmNr) {
    VecF bv[kNv];
    for (int v = 0; v < kNv; ++v) bv[v] = VecF::load(b + v * VecF::kLanes);
    for (int r = 0; r < R; ++r) {
      const VecF av = VecF::splat(a[r * g.lda + kk]);
      for (int v = 0; v < kNv; ++v) acc[r][v] = fmadd(av, bv[v], acc[r][v]);
    }
  }
  const VecF lo = VecF::splat(g.lo), hi = VecF::splat(g.hi);
  for (int v = 0; v < kNv; ++v) {
    const int64_t left = cols - v * VecF::kLanes;
    if (left <= 0) break;
    VecF bias = VecF::zero();
    if (last && g.bias) bias = left >= VecF::kLanes ? VecF::load(g.bias + col + v * VecF::kLanes)
                                                    : VecF::load_tail(g.bias + col + v * VecF::kLanes, left);
    for (int r = 0; r < R; ++r) {
      VecF x = acc[r][v];
      if (last) x = min(max(x + bias, lo), hi);
      float* c = g.c + (i + r) * g.ldc + col + v * VecF::kLanes;
      left >= VecF::kLanes ? x.store(c) : x.store_tail(c, left);
    }
  }
}

template <int R>
void tile_rows(int rows, const GemmArgs& g, int64_t i, int64_t p, int64_t k0, int64_t kc) {
  if (rows == R)
    tile<R>(g, i, p, k0, kc);
  else if constexpr (R > 1)
    tile_rows<R - 1>(rows, g, i, p, k0, kc);
}

}  // namespace

void sgemm_f32(const GemmArgs& g, int64_t m0, int64_t m1, int64_t p0, int64_t p1) {
  if (g.k == 0) {  // no products: C = act(bias)
    for (int64_t i = m0; i < m1; ++i)
      for (int64_t j = p0 * kGemmNr; j < min_i(p1 * kGemmNr, g.n); ++j) {
        const float x = g.bias ? g.bias[j] : 0.f;
        g.c[i * g.ldc + j] = x < g.lo ? g.lo : x > g.hi ? g.hi : x;
      }
    return;
  }
  for (int64_t k0 = 0; k0 < g.k; k0 += kKc) {
    const int64_t kc = min_i(kKc, g.k - k0);
    for (int64_t pb = p0; pb < p1; pb += kPanels) {
      const int64_t pe = min_i(pb + kPanels, p1);
      for (int64_t i = m0; i < m1; i += kMr) {
        const int rows = static_cast<int>(min_i(kMr, m1 - i));
        for (int64_t p = pb; p < pe; ++p) tile_rows<kMr>(rows, g, i, p, k0, kc);
      }
    }
  }
}

MSV0_EXPORT(sgemm_f32)
}  // namespace MSV0_ISA
}  // namespace msv0

#else  // binding pass
#include <optional>
#include <vector>
#include <pybind11/stl.h>

#include "runtime/native.h"

namespace msv0 {

int64_t sgemm_packed_size(int64_t n, int64_t k) { return (n + kGemmNr - 1) / kGemmNr * kGemmNr * k; }

void sgemm_pack_b(const float* b, int64_t ldb, bool transposed, int64_t n, int64_t k, float* dst) {
  const int64_t panels = (n + kGemmNr - 1) / kGemmNr;
  for (int64_t p = 0; p < panels; ++p)
    for (int64_t kk = 0; kk < k; ++kk)
      for (int64_t j = 0; j < kGemmNr; ++j) {
        const int64_t col = p * kGemmNr + j;
        *dst++ = col >= n ? 0.f : transposed ? b[col * ldb + kk] : b[kk * ldb + col];
      }
}

void sgemm_run(const GemmArgs& g) {
  const SgemmFn fn = MSV0_DISPATCH(sgemm_f32);
  const int64_t panels = (g.n + kGemmNr - 1) / kGemmNr;
  // Split rows when there are enough of them, else panels (a batch-1 FullConnection).
  if (g.m >= 4 * panels || g.m >= 64)
    parallel_for(g.m, 12, [&](int64_t m0, int64_t m1) { fn(g, m0, m1, 0, panels); });
  else
    parallel_for(panels, 1, [&](int64_t p0, int64_t p1) { fn(g, 0, g.m, p0, p1); });
}

// A GEMM with B packed once: the weight of a FullConnection or of a constant MatMul operand.
class PackedGemm {
 public:
  PackedGemm(const py::array& b, bool transposed, std::optional<py::array> bias)
      : transposed_(transposed) {
    if (b.ndim() != 2) throw ArgError("weight: expected a 2-D array");
    const float* pb = in_ptr<float>(b, "weight");
    n_ = transposed ? b.shape(0) : b.shape(1);
    k_ = transposed ? b.shape(1) : b.shape(0);
    packed_.resize(static_cast<size_t>(sgemm_packed_size(n_, k_)));
    sgemm_pack_b(pb, b.shape(1), transposed, n_, k_, packed_.data());
    if (bias) {
      expect_shape(*bias, {n_}, "bias");
      const float* pbias = in_ptr<float>(*bias, "bias");
      bias_.assign(pbias, pbias + n_);
    }
  }

  // y[m, n] = clamp(x[m, k] · B + bias); x and y are 2-D C-contiguous.
  void run(const py::array& x, py::array& y, float lo, float hi) const {
    if (x.ndim() != 2 || x.shape(1) != k_) throw ArgError("x: expected shape (m, " + std::to_string(k_) + ")");
    expect_shape(y, {x.shape(0), n_}, "y");
    const GemmArgs g = args(in_ptr<float>(x, "x"), out_ptr<float>(y, "y"), x.shape(0), lo, hi);
    py::gil_scoped_release unlocked;
    sgemm_run(g);
  }

  int64_t n() const { return n_; }
  int64_t k() const { return k_; }

  GemmArgs args(const float* x, float* y, int64_t rows, float lo, float hi) const {
    return GemmArgs{x, k_, packed_.data(), bias_.empty() ? nullptr : bias_.data(), y, n_, rows, n_, k_, lo, hi};
  }

 private:
  bool transposed_;
  int64_t n_ = 0, k_ = 0;
  std::vector<float> packed_, bias_;
};

// y[rows, n] = clamp(x[rows, k] · B + bias) on raw buffers, for a Program.
class GemmOp : public NativeOp {
 public:
  GemmOp(std::shared_ptr<const PackedGemm> g, int64_t rows, float lo, float hi)
      : g_(std::move(g)), rows_(rows), lo_(lo), hi_(hi) {}
  void run(const void* const* in, void* const* out) const override {
    sgemm_run(g_->args(static_cast<const float*>(in[0]), static_cast<float*>(out[0]), rows_, lo_, hi_));
  }

 private:
  std::shared_ptr<const PackedGemm> g_;
  int64_t rows_;
  float lo_, hi_;
};

MSV0_BIND(m) {
  py::class_<GemmOp, NativeOp, std::shared_ptr<GemmOp>>(m, "GemmOp");
  py::class_<PackedGemm, std::shared_ptr<PackedGemm>>(m, "PackedGemm",
                         "y = clamp(x · B + bias, lo, hi) with B (k x n, or n x k when transposed) packed once.")
      .def(py::init<const py::array&, bool, std::optional<py::array>>(), py::arg("b"), py::arg("transposed"),
           py::arg("bias") = py::none())
      .def("run", &PackedGemm::run, py::arg("x"), py::arg("y"), py::arg("lo") = -INFINITY,
           py::arg("hi") = INFINITY)
      .def("native", [](std::shared_ptr<PackedGemm> g, int64_t rows, float lo, float hi) {
             if (rows < 0) throw ArgError("rows must be >= 0");
             return std::shared_ptr<NativeOp>(std::make_shared<GemmOp>(std::move(g), rows, lo, hi));
           }, py::arg("rows"), py::arg("lo") = -INFINITY, py::arg("hi") = INFINITY,
           "A NativeOp running this product on rows x k inputs.")
      .def_property_readonly("n", &PackedGemm::n)
      .def_property_readonly("k", &PackedGemm::k);
}

}  // namespace msv0
#endif
