// Packed int8 GEMM, the ground of int8 Conv2D (1x1 and im2col), FullConnection and MatMul, with
// r1.1's arithmetic (format-v0.md §3.1):
//   acc[m, n] = Σ_k (A[m, k] − a_zp) · (B[k, n] − b_zp[n]) + bias[n]    (int32, wrapping)
//   C[m, n]   = acc, or as int8 clamp(RDBPOT(SRDHM(acc · 2^left[n], mult[n]), right[n]) + c_zp, lo, hi),
//               or as float32 clamp(float(acc) · c_scale[n] (+ c_bias[n]), c_lo, c_hi), rounded
//               after each step
// B is packed once into panels of kGemmS8Nr columns: panel p holds ceil(k / 4) groups, group g
// holding for each of the panel's 16 columns its 4 values B[4g .. 4g + 3, col] (one 32-bit lane
// per column: the operand layout of vpdpbusd and sdot), zero past k and n. Every tier's packer
// writes this layout, so a Session may change tiers without repacking.
#pragma once
#include <cstdint>

namespace msv0 {

constexpr int64_t kGemmS8Nr = 16;
constexpr int64_t kGemmS8Kr = 4;

struct GemmS8Args {
  const int8_t* a;  // m rows, row stride lda
  int64_t lda;
  const int8_t* b_packed;
  // Per column, padded with zeros to whole panels so kernels load them as whole vectors:
  const int32_t* b_sum;  // Σ_k B[k, n], written by the packer
  const int32_t* b_zp;  // null when every column's zero point is 0 (symmetric weights)
  const int32_t* bias;
  const int32_t* mult;  // requantization (mult, left, right): null for int32 output
  const int32_t* left;
  const int32_t* right;
  int32_t a_zp, c_zp, lo, hi;
  int32_t* c32;  // int32 output (when mult is null), or
  int8_t* c8;    // int8 output; m rows, row stride ldc; may not alias a
  int64_t ldc;
  int64_t m, n, k;
  float* cf = nullptr;  // or, when c32 and c8 are null, float32 output scaled per column by
  const float* c_scale = nullptr;  // c_scale (padded to whole panels like the arrays above)
  const float* c_bias = nullptr;   // and then offset by c_bias where it is not null (padded too)
  float c_lo = -__builtin_inff(), c_hi = __builtin_inff();  // and clamped (a fused ReLU)
};

// Bytes of packed B, then kGemmS8PackSlack more: the AMX slot reads B in tiles of 16 groups,
// and the last tile of the last panel may reach 15 groups past it (against zeros of A).
constexpr int64_t kGemmS8PackSlack = 15 * kGemmS8Nr * kGemmS8Kr;
static inline int64_t gemm_s8_packed_size(int64_t n, int64_t k) {
  return (n + kGemmS8Nr - 1) / kGemmS8Nr * kGemmS8Nr * ((k + kGemmS8Kr - 1) / kGemmS8Kr * kGemmS8Kr) + kGemmS8PackSlack;
}

// A task copies the rows of A of one row tile into its scratch in chunks of kGemmS8Kc values of
// k, chunk after chunk, rows kGemmS8ChunkStride bytes apart within a chunk: a compile-time
// stride, so the micro-kernel addresses every row from one pointer.
constexpr int64_t kGemmS8Kc = 256;
constexpr int64_t kGemmS8ChunkStride = kGemmS8Kc + 64;  // not a multiple of 256: rows in distinct L1 sets
// static: tier passes call it too, and a shared inline copy could carry a wider tier's code.
static inline int64_t gemm_s8_scratch_bytes(int64_t k, int64_t mr) {
  // + mr int32 row sums: the plain kernel's (the AMX slot, one tile behind, keeps two sets on its stack)
  return ((k + kGemmS8Kc - 1) / kGemmS8Kc * kGemmS8ChunkStride + 4) * mr;
}

// Rows [m0, m1) and panels [p0, p1) of C; scratch: gemm_s8_scratch_bytes(k, mr), 4-byte aligned.
using GemmS8Fn = void (*)(const GemmS8Args&, int64_t m0, int64_t m1, int64_t p0, int64_t p1, int8_t* scratch);
// Packs row-major B (k x n, row stride ldb) or, with transposed, B^T given as n x k into dst
// (gemm_s8_packed_size bytes) and its column sums into b_sum (whole panels).
using GemmS8PackFn = void (*)(const int8_t* b, int64_t ldb, bool transposed, int64_t n, int64_t k, int8_t* dst,
                              int32_t* b_sum);

// Rows of A read in place, int8 C: row r's values k in [64s, 64s + 64) at a + step_off[s] +
// r · row_stride (k a multiple of 64), such as the windows of a convolution's output pixels
// along a row of x. C rows [0, m) (m >= 16) and panels [p0, p1); symmetric B only (b_zp null).
constexpr int64_t kGemmS8Step = 64;
using GemmS8StridedFn = void (*)(const GemmS8Args&, const int64_t* step_off, int64_t row_stride, int64_t p0,
                                 int64_t p1);

// A tier's entry: the kernel, its row tile (mr rows of A per task's scratch), the B layout it
// reads (nr columns per panel, kr values of k per column and group) and that layout's packer;
// the AMX slot adds its in-place kernel (null elsewhere).
struct GemmS8Kernel {
  GemmS8Fn fn;
  int64_t mr, nr, kr;
  GemmS8PackFn pack;
  GemmS8StridedFn strided = nullptr;
};

// The slot a kernel object packs its B for and runs: the active tier's gemm_s8, or its AMX slot
// where it has one and AMX-INT8 is usable (gemm_s8.cc; binding pass).
const GemmS8Kernel& gemm_s8_kernel();

}  // namespace msv0
