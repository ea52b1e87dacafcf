// Packed SGEMM (see gemm_f32.h). The micro-kernel keeps a kMr x (kPt * 16) tile of C in
// registers; per k step it loads one row of each of its kPt adjacent B panels and broadcasts
// kMr values of A. The kMr x kc slice of A is first copied (vector row copies) into a stack
// buffer whose row stride is not a multiple of 1 KiB, so the broadcasts stream from L1 instead
// of kMr rows lda apart that alias in L1 when lda is a power of two. k is blocked so that
// buffer stays in L1 and a block of B panels in L2.
#include "kernels/gemm_f32.h"

#include "kernels/kernel.h"

namespace msv0 {
MSV0_DECLARE(sgemm_f32, SgemmConfig)
}  // namespace msv0

#if !MSV0_ONCE
namespace msv0 {
namespace MSV0_ISA {
namespace {

constexpr int kNv = static_cast<int>(kGemmNr) / VecF::kLanes;  // vectors per panel row
// Tile shape: as many accumulators as the register file holds beside the B row and one A
// broadcast. AVX-512 (32 registers): 12 x 32 = 24 accumulators, so each k step does 24 FMAs
// for 2 loads + 12 broadcasts; a 12 x 16 tile was load-bound. AVX2 (16 registers): 6 x 16 = 12.
// NEON (32 registers of 4 lanes): 6 x 16 = 24. Scalar: 4 x 16.
constexpr int kPt = VecF::kLanes >= 16 ? 2 : 1;  // adjacent panels per tile
constexpr int kMr = VecF::kLanes >= 16 ? 12 : VecF::kLanes == 8 ? 6 : VecF::kLanes == 4 ? 6 : 4;
// A tile of few rows (a GEMV, a product's last rows) takes more panels at once, at most 8 (B
// streams), for kFewRowsAcc accumulators so that the FMA latency stays hidden: 12, or two
// thirds of a full tile's where that is fewer (AVX2's 16 registers hold 8 beside the B row;
// with 12 they spilled). It does not split k into interleaved partial sums instead: then every
// element of C is one chain of multiply-adds per k block, whatever tile holds it, and results
// do not depend on how rows are split between tiles or threads (a Session gives the same bits
// at any thread count).
constexpr int kFewRowsAcc = kMr * kPt * kNv * 2 / 3 < 12 ? kMr * kPt * kNv * 2 / 3 : 12;
constexpr int panels_for(int rows) {
  const int want = (kFewRowsAcc + rows * kNv - 1) / (rows * kNv), fit = kMr * kPt / rows;
  const int p = want < fit ? want : fit;
  return p < kPt ? kPt : p > 8 ? 8 : p;
}

constexpr int64_t kKc = kGemmKc;  // k block: packed A is kMr * kc floats (12 KiB on AVX-512)
constexpr int64_t kLdA = kKc + 16;  // row stride of packed A: 1 KiB + 64 B
constexpr int64_t kPanels = 32;  // panels per block: kc x 512 columns of B (512 KiB) stay in L2

// C tile rows [i, i + R), panels [p, p + P), k block [k0, k0 + kc), the first V vectors of each
// row (fewer than the panels hold only in the matrix's last panel). a points at A[i, k0], rows
// kLdA apart when Packed, else g.lda apart.
template <int R, int P, bool Packed, int V = P * kNv>
void tile(const GemmArgs& g, const float* a, int64_t i, int64_t p, int64_t k0, int64_t kc, bool ahead) {
  const bool first = k0 == 0, last = k0 + kc == g.k;
  const int64_t col = p * kGemmNr, cols = min_i(P * kGemmNr, g.n - col);
  constexpr int kV = V;
  // Accumulate from zero and add the partial C of earlier k blocks at the end: its lines were
  // prefetched here, so their trip from L3 overlaps the k loop instead of stalling it.
  if (!first)
    for (int r = 0; r < R; ++r)
      for (int64_t j = 0; j < cols; j += 16) prefetch(g.c + (i + r) * g.ldc + col + j);
  VecF acc[R][kV];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int v = 0; v < kV; ++v) acc[r][v] = VecF::zero();
  const int64_t panel = kc * kGemmNr;  // distance between adjacent panels of this k block
  const float* b = g.b_packed + k0 * ((g.n + kGemmNr - 1) / kGemmNr) * kGemmNr + p * panel;
  const int64_t lda = Packed ? kLdA : g.lda;
  for (int64_t kk = 0; kk < kc; ++kk) {
    VecF bv[kV];
#pragma GCC unroll 16
    for (int v = 0; v < kV; ++v) bv[v] = VecF::load(b + v / kNv * panel + v % kNv * VecF::kLanes);
    // One 64-byte line per panel row: fetch the same row of the next P panels, so a B that
    // comes from DRAM streams in while this tile computes instead of stalling the next one.
    // Otherwise the rows 8 ahead in this tile's own panels: B comes from L2, and the hardware
    // prefetcher alone left SGEMM 512^3 at 67 % of the AVX-512 FMA peak (82 % with this).
    if (ahead)
      for (int q = 0; q < P; ++q) prefetch(b + (P + q) * panel);
    else
      for (int q = 0; q < P; ++q) prefetch(b + q * panel + 8 * kGemmNr);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const VecF av = VecF::splat(a[r * lda + kk]);
#pragma GCC unroll 16
      for (int v = 0; v < kV; ++v) acc[r][v] = fmadd(av, bv[v], acc[r][v]);
    }
    b += kGemmNr;
  }
  const VecF lo = VecF::splat(g.lo), hi = VecF::splat(g.hi);
  // Every loop over acc is unrolled completely, so acc stays in registers: left a loop (clang's
  // choice here), it indexes acc, which then lives on the stack, stored at every k step (the
  // zig-built wheel's SGEMM 512^3 ran at 61 GFLOP/s, 140 with this); GCC keeps registers inside
  // the k loop but homes them on the stack around it, storing all of them before and after.
#pragma GCC unroll 16
  for (int v = 0; v < kV; ++v) {
    const int64_t left = cols - v * VecF::kLanes;
    if (left <= 0) break;
    VecF bias = VecF::zero();
    if (last && g.bias) bias = left >= VecF::kLanes ? VecF::load(g.bias + col + v * VecF::kLanes)
                                                    : VecF::load_tail(g.bias + col + v * VecF::kLanes, left);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      VecF x = acc[r][v];
      float* c = g.c + (i + r) * g.ldc + col + v * VecF::kLanes;
      if (!first) x = x + (left >= VecF::kLanes ? VecF::load(c) : VecF::load_tail(c, left));
      if (last) x = clamp(x + bias, lo, hi);
      left >= VecF::kLanes ? x.store(c) : x.store_tail(c, left);
    }
  }
}

// Panel p alone, computing only the vectors that hold columns: on AVX2 (two vectors a panel) a
// matrix of 24 columns would spend half of its last panel's multiply-adds on padding.
template <int R, bool Packed, int V = kNv>
void lone_panel(int vectors, const GemmArgs& g, const float* a, int64_t i, int64_t p, int64_t k0, int64_t kc,
                bool ahead) {
  if constexpr (V > 1)
    if (vectors < V) return lone_panel<R, Packed, V - 1>(vectors, g, a, i, p, k0, kc, ahead);
  tile<R, 1, Packed, V>(g, a, i, p, k0, kc, ahead);
}

// Panels [pb, pe) of row tile i (R rows): P panels at a time (panels_for(R), then halves),
// a lone last panel on its own. ahead: prefetch the panels after each group (see tile).
template <int R, int P = panels_for(R)>
void row_tile(const GemmArgs& g, const float* a, bool packed, int64_t i, int64_t pb, int64_t pe, int64_t k0,
              int64_t kc, bool ahead) {
  if constexpr (P > 1) {
    for (; packed && pb + P <= pe; pb += P) tile<R, P, true>(g, a, i, pb, k0, kc, ahead);
    return row_tile<R, P / 2>(g, a, packed, i, pb, pe, k0, kc, ahead);
  }
  for (; pb < pe; ++pb) {
    const int vectors = static_cast<int>((min_i(kGemmNr, g.n - pb * kGemmNr) + VecF::kLanes - 1) / VecF::kLanes);
    packed ? lone_panel<R, true>(vectors, g, a, i, pb, k0, kc, ahead)
           : lone_panel<R, false>(vectors, g, a, i, pb, k0, kc, ahead);
  }
}

template <int R>
void row_tile_of(int rows, const GemmArgs& g, const float* a, bool packed, int64_t i, int64_t pb, int64_t pe,
                 int64_t k0, int64_t kc, bool ahead) {
  if (rows == R)
    row_tile<R>(g, a, packed, i, pb, pe, k0, kc, ahead);
  else if constexpr (R > 1)
    row_tile_of<R - 1>(rows, g, a, packed, i, pb, pe, k0, kc, ahead);
}

// dst[r * kLdA + kk] = A[i + r, k0 + kk].
void pack_a(const GemmArgs& g, int64_t i, int rows, int64_t k0, int64_t kc, float* dst) {
  for (int r = 0; r < rows; ++r) {
    const float* src = g.a + (i + r) * g.lda + k0;
    float* d = dst + r * kLdA;
    int64_t kk = 0;
    for (; kk + VecF::kLanes <= kc; kk += VecF::kLanes) VecF::load(src + kk).store(d + kk);
    if (kk < kc) VecF::load_tail(src + kk, kc - kk).store_tail(d + kk, kc - kk);
  }
}

// Few rows (a 7x7 or 14x14 conv, a small batch): every row tile of a k block is packed at
// once and the panel groups are the outer loop, so each group of B is read from memory once,
// by the first row tile while it prefetches the next group, and reused from L1 by the others.
// With the row tiles inside, the first row tile of each block would wait on the whole block
// of B (often fresh from DRAM: ResNet-50's stage 5 holds 9 MiB per conv) with no work to hide it.
constexpr int64_t kFewRows = 120 / kMr * kMr;

void sgemm_few_rows(const GemmArgs& g, int64_t m0, int64_t m1, int64_t p0, int64_t p1) {
  alignas(64) float packed_a[kFewRows * kLdA];
  const bool packed = p1 - p0 > 1;  // as in sgemm_f32
  for (int64_t k0 = 0; k0 < g.k; k0 += kKc) {
    const int64_t kc = min_i(kKc, g.k - k0);
    if (packed)
      for (int64_t i = m0; i < m1; i += kMr)
        pack_a(g, i, static_cast<int>(min_i(kMr, m1 - i)), k0, kc, packed_a + (i - m0) * kLdA);
    // A last row tile that takes more than kPt panels at a time (see panels_for) runs on its own
    // over all of them, after the others.
    const int tail = static_cast<int>((m1 - m0) % kMr);
    const int64_t grouped = tail && panels_for(tail) > kPt ? m1 - tail : m1;
    const auto rows = [&](int64_t i, int64_t pb, int64_t pe, bool ahead) {
      const float* a = packed ? packed_a + (i - m0) * kLdA : g.a + i * g.lda + k0;
      row_tile_of<kMr>(static_cast<int>(min_i(kMr, m1 - i)), g, a, packed, i, pb, pe, k0, kc, ahead);
    };
    for (int64_t p = p0; p < p1 && m0 < grouped; p += kPt)
      // With a single row tile no other tile reuses the group, and prefetching the next one
      // only evicts this one from L1: 1x1536x128 on AVX-512 took 11.2 us, 8.7 without.
      for (int64_t i = m0; i < grouped; i += kMr) rows(i, p, min_i(p + kPt, p1), i == m0 && grouped - m0 > kMr);
    if (grouped < m1) rows(grouped, p0, p1, false);
  }
}

}  // namespace

void sgemm_f32(const GemmArgs& g, int64_t m0, int64_t m1, int64_t p0, int64_t p1) {
  if (g.k == 0) return sgemm_bias_only(g, m0, m1, p0, p1);
  if (m1 - m0 <= kFewRows) return sgemm_few_rows(g, m0, m1, p0, p1);
  alignas(64) float packed_a[kMr * kLdA];
  for (int64_t k0 = 0; k0 < g.k; k0 += kKc) {
    const int64_t kc = min_i(kKc, g.k - k0);
    for (int64_t pb = p0; pb < p1; pb += kPanels) {
      const int64_t pe = min_i(pb + kPanels, p1);
      // Packing costs about one extra pass over A per block; one panel does not repay it.
      const bool packed = pe - pb > 1;
      for (int64_t i = m0; i < m1; i += kMr) {
        const int rows = static_cast<int>(min_i(kMr, m1 - i));
        if (packed) pack_a(g, i, rows, k0, kc, packed_a);
        const float* a = packed ? packed_a : g.a + i * g.lda + k0;
        // The first row tile of a block is the one that pulls B in from memory.
        row_tile_of<kMr>(rows, g, a, packed, i, pb, pe, k0, kc, i == m0);
      }
    }
  }
}

// One layout on every tier today (panels of kGemmNr columns, k-blocked by kGemmKc), so a
// Session may change tiers without repacking.
void sgemm_pack_b(const float* b, int64_t ldb, bool transposed, int64_t n, int64_t k, float* dst) {
  const int64_t panels = (n + kGemmNr - 1) / kGemmNr;
  for (int64_t k0 = 0; k0 < k; k0 += kGemmKc)
    for (int64_t p = 0; p < panels; ++p) {
      const int64_t kc = min_i(kGemmKc, k - k0);
      // Column by column: B^T's rows are read along k (a block of kc x 16 floats stays in L1).
      for (int64_t j = 0; j < kGemmNr; ++j) {
        const int64_t col = p * kGemmNr + j;
        float* d = dst + j;
        if (col >= n)
          for (int64_t kk = 0; kk < kc; ++kk) d[kk * kGemmNr] = 0.f;
        else if (transposed)
          for (int64_t kk = 0; kk < kc; ++kk) d[kk * kGemmNr] = b[col * ldb + k0 + kk];
        else
          for (int64_t kk = 0; kk < kc; ++kk) d[kk * kGemmNr] = b[(k0 + kk) * ldb + col];
      }
      dst += kc * kGemmNr;
    }
}

MSV0_EXPORT_CONFIG(sgemm_f32, sgemm_f32, kMr, kPt * kGemmNr, sgemm_pack_b, sgemm_packed_size)
}  // namespace MSV0_ISA
}  // namespace msv0

#else  // binding pass
#include <algorithm>
#include <optional>
#include <string>
#include <vector>
#include <pybind11/stl.h>

#include "kernels/post_op.h"
#include "runtime/native.h"

namespace msv0 {

const SgemmConfig& sgemm_config() { return MSV0_DISPATCH(sgemm_f32); }

Precision parse_precision(const std::string& name) {
  if (name == "fp32") return Precision::kFp32;
  if (name == "bf16") return Precision::kBf16;
  if (name == "fp16") return Precision::kFp16;
  throw ArgError("precision must be fp32, bf16 or fp16, got '" + name + "'");
}

const SgemmConfig& gemm_config(Precision precision) {
  if (precision == Precision::kFp32) return sgemm_config();
  const bool bf16 = precision == Precision::kBf16;
  const SgemmConfig& c = bf16 ? bf16_gemm() : fp16_gemm();
  if (c.fn) return c;
  const std::string active = isa_name(active_isa());
  throw ArgError(bf16 ? "bf16: needs AVX512-BF16 and the avx512 tier (active: " + active + ")"
                      : "fp16: needs FP16 arithmetic (ARMv8.2-A) and the neon tier (active: " + active + ")");
}

std::shared_ptr<const PackedB> pack_b(const float* b, int64_t ldb, bool transposed, int64_t n, int64_t k,
                                      const float* bias, const SgemmConfig& gemm) {
  auto p = std::make_shared<PackedB>();
  p->gemm = &gemm;
  p->n = n;
  p->k = k;
  p->w.resize(static_cast<size_t>(gemm.packed_size(n, k)));
  gemm.pack(b, ldb, transposed, n, k, p->w.data());
  if (bias) p->bias.assign(bias, bias + n);
  return p;
}

void sgemm_run(const SgemmConfig& cfg, const GemmArgs& g, const PostOp* post) {
  const int64_t panels = (g.n + kGemmNr - 1) / kGemmNr, tile = cfg.nr / kGemmNr;
  // Split rows when there are enough of them, else panels (a batch-1 FullConnection), in
  // whole micro-kernel tiles either way.
  if (g.m >= 4 * panels || g.m >= 64)
    parallel_for(g.m, cfg.mr, [&](int64_t m0, int64_t m1) {
      cfg.fn(g, m0, m1, 0, panels);
      if (post) post->apply(g.c, m0 * g.n, m1 * g.n);
    });
  else
    parallel_for((panels + tile - 1) / tile, 1, [&](int64_t q0, int64_t q1) {
      const int64_t p1 = q1 * tile < panels ? q1 * tile : panels;
      cfg.fn(g, 0, g.m, tile * q0, p1);
      if (post) post->apply_pixels(g.c, g.n, 0, g.m, tile * q0 * kGemmNr, std::min(p1 * kGemmNr, g.n));
    });
}

// y = clamp(x · B + bias, lo, hi) with B packed once: a FullConnection, or a constant MatMul
// operand. x holds rows x k floats and y rows x n, in the shapes fixed here. With bf16 or fp16,
// B and x are rounded to it (see Precision).
class Gemm : public NativeOp {
 public:
  Gemm(const py::array& b, bool transposed, std::optional<py::array> bias, const std::vector<int64_t>& x_shape,
       const std::vector<int64_t>& y_shape, float lo, float hi, const std::string& precision)
      : lo_(lo), hi_(hi) {
    if (b.ndim() != 2) throw ArgError("weight: expected a 2-D array");
    const int64_t n = transposed ? b.shape(0) : b.shape(1), k = transposed ? b.shape(1) : b.shape(0);
    if (bias) expect_shape(*bias, {n}, "bias");
    checked_shape(x_shape, x_shape.size(), "x_shape");
    checked_shape(y_shape, y_shape.size(), "y_shape");
    if (y_shape.empty() || y_shape.back() != n) throw ArgError("y_shape: last dim must be " + std::to_string(n));
    rows_ = n ? elements(y_shape) / n : elements(std::vector<int64_t>(y_shape.begin(), y_shape.end() - 1));
    if (elements(x_shape) != rows_ * k)
      throw ArgError("x_shape: expected " + std::to_string(rows_) + " rows of " + std::to_string(k));
    b_ = pack_b(in_ptr<float>(b, "weight"), b.shape(1), transposed, n, k,
                bias ? in_ptr<float>(*bias, "bias") : nullptr, gemm_config(parse_precision(precision)));
    set_operands({{x_shape}}, {{y_shape}});
  }

  void run(const void* const* in, void* const* out) const override {
    sgemm_run(*b_->gemm, GemmArgs{static_cast<const float*>(in[0]), b_->k, b_->w.data(), b_->bias_or_null(),
                       static_cast<float*>(out[0]), b_->n, rows_, b_->n, b_->k, lo_, hi_}, post_ ? &post_ : nullptr);
  }
  const char* name() const override { return "gemm"; }
  std::shared_ptr<NativeOp> with_post(const PostOp& post) const override {
    auto c = std::make_shared<Gemm>(*this);
    c->post_ = post_.then(post);
    return c;
  }

 private:
  std::shared_ptr<const PackedB> b_;
  PostOp post_;
  int64_t rows_;
  float lo_, hi_;
};

MSV0_BIND(m) {
  m.def("sgemm_tile", [] { return py::make_tuple(sgemm_config().mr, sgemm_config().nr); },
        "(mr, nr): the rows and columns of C per micro-kernel tile on the active tier.");
  py::class_<Gemm, NativeOp, std::shared_ptr<Gemm>>(m, "Gemm",
      "y = clamp(x · B + bias, lo, hi) with B (k x n, or n x k when transposed) packed once, on x of x_shape "
      "(rows x k elements) into y of y_shape (rows x n).")
      .def(py::init<const py::array&, bool, std::optional<py::array>, const std::vector<int64_t>&,
                    const std::vector<int64_t>&, float, float, const std::string&>(),
           py::arg("b"), py::arg("transposed"), py::arg("bias"), py::arg("x_shape"), py::arg("y_shape"),
           py::arg("lo") = -INFINITY, py::arg("hi") = INFINITY, py::arg("precision") = "fp32");
}

}  // namespace msv0
#endif
