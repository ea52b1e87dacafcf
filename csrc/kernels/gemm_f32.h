// Packed SGEMM shared by FullConnection, MatMul and the convolutions:
//   C[m, n] = clamp(A[m, k] · B[k, n] + bias[n], lo, hi)
// B is packed once per Session into panels of kGemmNr columns, k-blocked: for each block of
// kGemmKc rows of k (the last one shorter), all panels follow each other, panel p holding that
// block's rows of columns [16p, 16p + 16), 16 floats per row, zero-padded past n. A block of
// panels is one contiguous run (no cache-set conflicts between panels when k is a power of
// two), and the layout is the same on every ISA, so a Session may change tiers without
// repacking; a micro-kernel may consume several adjacent panels.
#pragma once
#include <cstdint>

namespace msv0 {

constexpr int64_t kGemmNr = 16;
constexpr int64_t kGemmKc = 256;

struct GemmArgs {
  const float* a;  // m rows, row stride lda
  int64_t lda;
  const float* b_packed;  // ceil(n / 16) panels of k x 16, k-blocked as above (the bf16 slot: its own layout)
  const float* bias;      // n floats, or null
  float* c;               // m rows, row stride ldc; may not alias a
  int64_t ldc;
  int64_t m, n, k;
  float lo, hi;  // fused activation as a clamp; -inf/+inf for none
};

// Rows [m0, m1) and panels [p0, p1) of C.
using SgemmFn = void (*)(const GemmArgs&, int64_t m0, int64_t m1, int64_t p0, int64_t p1);
// Packs row-major B (k x n, row stride ldb) or, with transposed, B^T given as n x k (row
// stride ldb) into dst (packed_size floats), in the layout the slot's fn reads.
using SgemmPackFn = void (*)(const float* b, int64_t ldb, bool transposed, int64_t n, int64_t k, float* dst);
// The floats (32-bit slots) the packer writes for n x k.
using SgemmPackedSizeFn = int64_t (*)(int64_t n, int64_t k);

// Rows of A in place, already bf16 (the bf16 AMX slot), in lines of vw rows: row j's values k in
// [32s, 32s + 32) at a + step_off[s] + (j / vw) · line + (j % vw) · row_stride (k a multiple of
// 32), such as the windows of a convolution's output pixels in a padded bf16 copy of x. Either
// line = vw · row_stride or vw is a multiple of 16 (an AMX tile's rows then lie in one line).
// Rows j in [0, m), m >= 16 and a multiple of 16 unless line = vw · row_stride, go to C row
// (j / vw) · ow + j % vw, none where j % vw >= ow; panels [p0, p1); bias and clamp as g says
// (g.a and g.lda unused).
using SgemmStridedFn = void (*)(const GemmArgs& g, const uint16_t* a, const int64_t* step_off, int64_t row_stride,
                                int64_t line, int64_t vw, int64_t ow, int64_t p0, int64_t p1);
// n floats to bf16, rounded as the slot rounds A (to nearest, ties to even).
using ToBf16Fn = void (*)(const float* x, uint16_t* y, int64_t n);

// A tier's SGEMM slot: the micro-kernel driver, its register tile and its packer. Schedulers
// split work on whole tiles (mr rows, nr columns) of the active tier. The bf16 AMX slot adds
// its in-place driver and the rounding its A takes (null elsewhere).
struct SgemmConfig {
  SgemmFn fn;
  int64_t mr;  // rows of C per micro-kernel tile
  int64_t nr;  // columns of C per micro-kernel tile: a whole number of kGemmNr panels
  SgemmPackFn pack;
  SgemmPackedSizeFn packed_size;
  SgemmStridedFn strided = nullptr;
  ToBf16Fn to_bf16 = nullptr;
};

static inline int64_t sgemm_packed_size(int64_t n, int64_t k) { return (n + kGemmNr - 1) / kGemmNr * kGemmNr * k; }

}  // namespace msv0

#if !MSV0_ONCE
namespace msv0 {
namespace MSV0_ISA {
void sgemm_f32(const GemmArgs& g, int64_t m0, int64_t m1, int64_t p0, int64_t p1);
// k = 0 leaves no products: C = act(bias) on rows [m0, m1), panels [p0, p1) (every GEMM slot).
inline void sgemm_bias_only(const GemmArgs& g, int64_t m0, int64_t m1, int64_t p0, int64_t p1) {
  const int64_t je = p1 * kGemmNr < g.n ? p1 * kGemmNr : g.n;
  for (int64_t i = m0; i < m1; ++i)
    for (int64_t j = p0 * kGemmNr; j < je; ++j) {
      const float x = g.bias ? g.bias[j] : 0.f;
      g.c[i * g.ldc + j] = x < g.lo ? g.lo : x > g.hi ? g.hi : x;
    }
}
}  // namespace MSV0_ISA
}  // namespace msv0
#else
#include <memory>
#include <string>
#include <vector>

#include "runtime/weight_memory.h"
namespace msv0 {
// The active tier's SGEMM slot.
const SgemmConfig& sgemm_config();
// The arithmetic of a GEMM-based float kernel object (Session precision): fp32, or B and A
// rounded to bf16 (gemm_bf16.cc, x86) or to fp16 (gemm_f16.cc, aarch64) by the slot that
// packs them, each a CPU feature of that one kernel. Named "fp32", "bf16", "fp16".
enum class Precision { kFp32, kBf16, kFp16 };
Precision parse_precision(const std::string& name);  // ArgError for any other name
// The slot a kernel object packs its constant B for (ArgError where the active tier has none).
const SgemmConfig& gemm_config(Precision precision);
// The active tier's reduced-precision slots; fn is null where this CPU or tier has none.
const SgemmConfig& bf16_gemm();
const SgemmConfig& fp16_gemm();
// Whether the active tier's bf16 GEMM runs on AMX tiles (else vdpbf16ps, or there is none).
bool bf16_gemm_on_amx();

// B packed once per Session by a slot's packer (pack_b), with its bias (empty for none): what
// a GEMM-based kernel object owns and a fused block that absorbs it shares.
struct PackedB {
  const SgemmConfig* gemm = nullptr;  // the slot that packed w, whose fn reads it
  int64_t n = 0, k = 0;
  WeightVector<float> w, bias;
  const float* bias_or_null() const { return bias.empty() ? nullptr : bias.data(); }
};
// b as for SgemmPackFn; bias: n floats, or null.
std::shared_ptr<const PackedB> pack_b(const float* b, int64_t ldb, bool transposed, int64_t n, int64_t k,
                                      const float* bias, const SgemmConfig& gemm = sgemm_config());

struct PostOp;  // kernels/post_op.h
// Runs the whole product with cfg's kernel over the bound thread pool (GIL must already be
// released); B was packed by cfg.pack. A post-op, if any, runs on each share of C (g.ldc == g.n)
// as soon as its thread has written it.
void sgemm_run(const SgemmConfig& cfg, const GemmArgs& g, const PostOp* post = nullptr);
}  // namespace msv0
#endif
