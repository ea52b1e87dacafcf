// The opt-in fp16 GEMM (Session precision="fp16", r1.1's enable_float16): the SGEMM contract of
// gemm_f32.h with B rounded to fp16 once by its packer and A rounded to fp16 while a block of it
// is packed; products and sums in fp16 as r1.1's fp16 kernels do, within each k block of kKc
// (blocks meet in the float32 C, which also takes bias and clamp). Built on the aarch64 tiers
// (neon, neondot) and filling their slot only on CPUs with FP16 arithmetic (ARMv8.2-A FP16: a
// feature of this one kernel, not a tier); elsewhere the slot reads as empty.
//
// Layout: B in panels of kGemmNr columns, k-blocked by kKc as in gemm_f32.h, 16 fp16 values per
// panel row. Packed A is k-major per row tile: kMr fp16 values (one per row) for each k, so one
// vector of A meets a panel row through fmla by lane.
#include "kernels/gemm_f32.h"

#include "kernels/kernel.h"
#include "simd/pragmas.h"

namespace msv0 {
MSV0_DECLARE(sgemm_f16, SgemmConfig)
bool cpu_has_fp16_arith();  // runtime/cpu_features.cc
}  // namespace msv0

#if !MSV0_ONCE
#if defined(__aarch64__) && MSV0_ISA_INDEX > 0  // neon, neondot
// The target gcc's arm_neon.h gives its fp16 intrinsics ("+fp16" alone fails on the neon tier);
// zig's clang takes the same string.
MSV0_TARGET_PUSH("arch=armv8.2-a+fp16")
#include <arm_neon.h>

namespace msv0 {
namespace MSV0_ISA {
namespace {

constexpr int kMr = 8;         // rows per tile: one fp16 vector of A, a lane per row
constexpr int64_t kKc = 256;   // k per block: fp16 sums over at most this many products
constexpr int64_t kNv = kGemmNr / 8;  // fp16 vectors per panel row

int64_t panels_of(int64_t n) { return (n + kGemmNr - 1) / kGemmNr; }
const float16_t* packed_b(const GemmArgs& g) { return reinterpret_cast<const float16_t*>(g.b_packed); }

// dst[kk * kMr + r] = fp16(A[i + r, k0 + kk]); rows past `rows` are zeros.
void pack_a(const GemmArgs& g, int64_t i, int rows, int64_t k0, int64_t kc, float16_t* dst) {
  for (int64_t kk = 0; kk < kc; ++kk)
    for (int r = 0; r < kMr; ++r)
      dst[kk * kMr + r] = r < rows ? static_cast<float16_t>(g.a[(i + r) * g.lda + k0 + kk]) : float16_t(0);
}

// fmla of row r's accumulators by lane r of the A vector (the lane must be a constant).
inline void fma_rows(float16x8_t (&acc)[kMr][kNv], float16x8_t a, const float16x8_t (&b)[kNv]) {
  for (int v = 0; v < kNv; ++v) {
    acc[0][v] = vfmaq_laneq_f16(acc[0][v], b[v], a, 0);
    acc[1][v] = vfmaq_laneq_f16(acc[1][v], b[v], a, 1);
    acc[2][v] = vfmaq_laneq_f16(acc[2][v], b[v], a, 2);
    acc[3][v] = vfmaq_laneq_f16(acc[3][v], b[v], a, 3);
    acc[4][v] = vfmaq_laneq_f16(acc[4][v], b[v], a, 4);
    acc[5][v] = vfmaq_laneq_f16(acc[5][v], b[v], a, 5);
    acc[6][v] = vfmaq_laneq_f16(acc[6][v], b[v], a, 6);
    acc[7][v] = vfmaq_laneq_f16(acc[7][v], b[v], a, 7);
  }
}

// C rows [i, i + rows) of panel p, k block [k0, k0 + kc): the block's fp16 sums added to the
// partial C of earlier blocks; on the last block bias and clamp.
void tile(const GemmArgs& g, const float16_t* a, int64_t i, int rows, int64_t p, int64_t k0, int64_t kc) {
  float16x8_t acc[kMr][kNv];
  for (int r = 0; r < kMr; ++r)
    for (int v = 0; v < kNv; ++v) acc[r][v] = vdupq_n_f16(0);
  const float16_t* b = packed_b(g) + k0 * panels_of(g.n) * kGemmNr + p * kc * kGemmNr;
  for (int64_t kk = 0; kk < kc; ++kk, b += kGemmNr) {
    float16x8_t bv[kNv];
    for (int v = 0; v < kNv; ++v) bv[v] = vld1q_f16(b + 8 * v);
    fma_rows(acc, vld1q_f16(a + kk * kMr), bv);
  }
  const bool first = k0 == 0, last = k0 + kc == g.k;
  const int64_t col = p * kGemmNr, cols = min_i(kGemmNr, g.n - col);
  for (int r = 0; r < rows; ++r) {
    float sums[kGemmNr];
    for (int v = 0; v < kNv; ++v) {
      vst1q_f32(sums + 8 * v, vcvt_f32_f16(vget_low_f16(acc[r][v])));
      vst1q_f32(sums + 8 * v + 4, vcvt_high_f32_f16(acc[r][v]));
    }
    float* c = g.c + (i + r) * g.ldc + col;
    for (int64_t j = 0; j < cols; ++j) {
      float x = sums[j];
      if (!first) x += c[j];
      if (last) {
        if (g.bias) x += g.bias[col + j];
        x = x < g.lo ? g.lo : x > g.hi ? g.hi : x;
      }
      c[j] = x;
    }
  }
}

void sgemm_f16(const GemmArgs& g, int64_t m0, int64_t m1, int64_t p0, int64_t p1) {
  if (g.k == 0) return sgemm_bias_only(g, m0, m1, p0, p1);
  alignas(16) float16_t packed_a[kKc * kMr];
  for (int64_t k0 = 0; k0 < g.k; k0 += kKc) {
    const int64_t kc = min_i(kKc, g.k - k0);
    for (int64_t i = m0; i < m1; i += kMr) {
      const int rows = static_cast<int>(min_i(kMr, m1 - i));
      pack_a(g, i, rows, k0, kc, packed_a);
      for (int64_t p = p0; p < p1; ++p) tile(g, packed_a, i, rows, p, k0, kc);
    }
  }
}

void sgemm_f16_pack_b(const float* b, int64_t ldb, bool transposed, int64_t n, int64_t k, float* dst) {
  float16_t* d = reinterpret_cast<float16_t*>(dst);
  for (int64_t k0 = 0; k0 < k; k0 += kKc) {
    const int64_t kc = min_i(kKc, k - k0);
    for (int64_t p = 0; p < panels_of(n); ++p)
      for (int64_t kk = 0; kk < kc; ++kk)
        for (int64_t j = 0; j < kGemmNr; ++j) {
          const int64_t col = p * kGemmNr + j, row = k0 + kk;
          *d++ = col < n ? static_cast<float16_t>(transposed ? b[col * ldb + row] : b[row * ldb + col]) : float16_t(0);
        }
  }
}

// Two fp16 values per float slot.
int64_t sgemm_f16_packed_size(int64_t n, int64_t k) { return (panels_of(n) * kGemmNr * k + 1) / 2; }

}  // namespace
}  // namespace MSV0_ISA
}  // namespace msv0
MSV0_TARGET_POP

// The load-time fill runs on every CPU: outside the fp16 target.
namespace msv0 {
namespace MSV0_ISA {
constexpr ::msv0::sgemm_f16_t sgemm_f16_config{sgemm_f16, kMr, kGemmNr, sgemm_f16_pack_b, sgemm_f16_packed_size};
[[maybe_unused]] static const bool sgemm_f16_exported =
    cpu_has_fp16_arith() && ::msv0::sgemm_f16_fill(MSV0_ISA_INDEX, sgemm_f16_config);
}  // namespace MSV0_ISA
}  // namespace msv0
#endif  // __aarch64__

#else  // binding pass
namespace msv0 {

const SgemmConfig& fp16_gemm() { return MSV0_DISPATCH(sgemm_f16); }

MSV0_BIND(m) {
  m.def("fp16_available", [] { return fp16_gemm().fn != nullptr; },
        "Whether the fp16 GEMM that precision=\"fp16\" needs runs here: FP16 arithmetic (ARMv8.2-A), on the "
        "neon tiers.");
}

}  // namespace msv0
#endif
