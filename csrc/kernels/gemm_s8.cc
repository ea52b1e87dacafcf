// Packed int8 GEMM (see gemm_s8.h). The micro-kernel keeps a kMr x (kPt * 16) tile of int32
// accumulators in registers over the whole of k; per group of 4 k it loads one group of each of
// its kPt panels and broadcasts 4 bytes of each of kMr rows of A into dot4, the tier's 4-way
// dot-accumulate (vpdpbusd, sdot, or a widening emulation). The zero points enter once per
// output, r1.1's expansion of Σ(a − a_zp)(b − b_zp) over the column sums of B (from the packer)
// and the row sums of A (taken while its rows are copied into the task's scratch, shifted to
// dot4's operand type). On the avx512vnni tier a second slot, gemm_s8_amx, multiplies the same
// packed B in AMX tiles (tdpbssd) where amx_usable(Amx::kInt8); the epilogue is the same code.
#include "kernels/gemm_s8.h"

#include "kernels/kernel.h"
#include "simd/pragmas.h"
// The float output's scale and bias round apart, as the Mul and Add steps it replaces do.
MSV0_FP_CONTRACT_OFF

namespace msv0 {
MSV0_DECLARE(gemm_s8, GemmS8Kernel)
MSV0_DECLARE(gemm_s8_amx, GemmS8Kernel)
}  // namespace msv0

#if !MSV0_ONCE
namespace msv0 {
namespace MSV0_ISA {
namespace {

constexpr int kLanes = VecI32::kLanes;
constexpr int kNv = static_cast<int>(kGemmS8Nr) / kLanes;  // vectors per panel group
constexpr int64_t kGroupBytes = kGemmS8Nr * kGemmS8Kr;
// Tile shape: as many accumulators as the register file holds beside one group of B, one A
// broadcast and, where dot4 widens, its temporaries. AVX-512 (32 registers): 12 x 32 with
// vpdpbusd, 8 x 32 when dot4 needs four more registers per B vector. AVX2 (16): 4 x 16.
// NEON (32 of 4 lanes): 6 x 16 with sdot, 4 x 16 when widening. Scalar: 2 x 16.
constexpr int kPt = kLanes >= 16 ? 2 : 1;
constexpr int kMr = kLanes >= 16 ? (kDot4Native ? 12 : 8) : kLanes == 8 ? 4 : kLanes == 4 ? (kDot4Native ? 6 : 4) : 2;
// Panels per block: a block of B (k x 16 bytes per panel) stays in L2 while every row tile of
// the task runs over it.
constexpr int64_t kBlockBytes = int64_t{1} << 20;

inline int8_t as_dot_a(int8_t x) { return static_cast<int8_t>(x + kDotAOffset); }
// A row tail at least this long goes through one vector rather than byte by byte.
constexpr int64_t kTailVector = 8;
static_assert(kGemmS8ChunkStride >= kGemmS8Kc + VecI8::kBytes, "a tail vector's store stays in its row");

// Rows [i, i + rows) of A, shifted to dot4's operand type, into dst in chunks of kGemmS8Kc
// (see gemm_s8.h); the last chunk's tail is padded with shifted zeros, to a whole vector when
// it is kTailVector bytes or more, else bytewise to a whole group of 4, as far as the
// micro-kernel reads. With Sums (some b_zp is not 0), row_term[r] = Σ_k A[i + r, k] − k · a_zp:
// symmetric weights need no row sums (without them MobileNetV2's int8 stem, k = 27, went from
// 360 to 330 us).
template <bool Sums>
void pack_a(const GemmS8Args& g, int64_t i, int rows, int8_t* dst, int32_t* row_term) {
  static const int8_t kOnes[4] = {1, 1, 1, 1};
  const VecI8 ones = VecI8::splat4(kOnes);
  const int64_t chunks = (g.k + kGemmS8Kc - 1) / kGemmS8Kc;
  for (int r = 0; r < rows; ++r) {
    VecI32 sum = VecI32::zero();
    uint32_t tail_sum = 0;  // the shifted tail bytes, summed bytewise
    int64_t summed = 0;     // shifted bytes in sum and tail_sum, padding included
    for (int64_t c = 0; c < chunks; ++c) {
      const int8_t* src = g.a + (i + r) * g.lda + c * kGemmS8Kc;
      int8_t* d = dst + (c * kMr + r) * kGemmS8ChunkStride;
      const int64_t n = min_i(kGemmS8Kc, g.k - c * kGemmS8Kc), whole = n / VecI8::kBytes * VecI8::kBytes;
      for (int64_t kk = 0; kk < whole; kk += VecI8::kBytes) {
        __builtin_prefetch(src + kk + kMr * g.lda);  // the next row tile's, read after this tile's products
        const VecI8 x = to_dot_a(VecI8::load(src + kk));
        x.store(d + kk);
        if constexpr (Sums) sum = dot4(sum, x, ones);
      }
      summed += whole;
      if (whole < n && n - whole >= kTailVector) {
        // One zero-padded vector (masked on AVX-512): its shifted zeros count in `summed` like the row's.
        const VecI8 x = to_dot_a(VecI8::load_tail(src + whole, n - whole));
        x.store(d + whole);
        if constexpr (Sums) sum = dot4(sum, x, ones);
        summed += VecI8::kBytes;
        continue;
      }
      const int64_t padded = (n + kGemmS8Kr - 1) / kGemmS8Kr * kGemmS8Kr;
      for (int64_t kk = whole; kk < padded; ++kk) {
        const int8_t x = kk < n ? src[kk] : 0;
        d[kk] = as_dot_a(x);
        tail_sum += static_cast<uint32_t>(x + kDotAOffset);  // the value dot4 reads
      }
      summed += padded - whole;
    }
    // In uint32, as r1.1's int32 arithmetic wraps.
    if constexpr (Sums)
      row_term[r] = static_cast<int32_t>(static_cast<uint32_t>(reduce_add(sum)) + tail_sum -
                                         static_cast<uint32_t>(kDotAOffset * summed) -
                                         static_cast<uint32_t>(g.k) * static_cast<uint32_t>(g.a_zp));
  }
}

// Requantized int8 rows of C from a tile's sums, stored row after row: columns [c0, c0 + n) of
// rows [i, i + rows), one vector each, sums[r] holding row r's (see finish).
void requant_rows(const GemmS8Args& g, const int32_t* sums, int64_t stride, int64_t i, int64_t c0, int64_t n, int rows) {
  const Requant rq{VecI32::load(g.mult + c0), VecI32::load(g.left + c0), VecI32::load(g.right + c0),
                   VecI32::splat(g.c_zp), VecI32::splat(g.lo), VecI32::splat(g.hi)};
  int8_t* c = g.c8 + i * g.ldc + c0;
  if (n >= kLanes) {
#pragma GCC unroll 2
    for (int r = 0; r < rows; ++r, c += g.ldc, sums += stride) rq(VecI32::load(sums)).store_s8(c);
  } else {
    for (int r = 0; r < rows; ++r, c += g.ldc, sums += stride) rq(VecI32::load(sums)).store_s8_tail(c, n);
  }
}

// The accumulators of C rows [i, i + rows) and columns [col, col + cols) (the first cols of
// V * kLanes) finished: the b_zp · row-sum term off, then stored as int32, requantized int8 or
// scaled float32.
// The loops over acc unroll completely, so that a tile's accumulators stay registers: indexed
// by a loop clang does not unroll, they live on the stack, stored at every k step. The int8
// epilogue is the exception: the sums go to the stack once and requant_rows loops over them.
// Unrolled over a 12 x 2 tile it was ~2000 instructions, its constants reloaded and rebuilt
// row by row beside 24 live accumulators; the loop is 6-8 % faster on MobileNetV2's 1x1 convs of
// small k (AVX-512), whose time is mostly this epilogue.
template <int R, int V>
void finish(const GemmS8Args& g, VecI32 (&acc)[R][V], const int32_t* row_term, int64_t i, int64_t col, int64_t cols,
            int rows) {
#pragma GCC unroll 8
  for (int v = 0; v < V; ++v) {
    if (!g.b_zp || v * kLanes >= cols) break;  // per-column arrays end at the last whole panel
    const VecI32 b_zp = VecI32::load(g.b_zp + col + v * kLanes);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
      if (r < rows) acc[r][v] = acc[r][v] - b_zp * VecI32::splat(row_term[r]);
  }
  if (g.c8) {
    alignas(64) int32_t sums[R][V * kLanes];
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) {
      if (v * kLanes >= cols) break;
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r)
        if (r < rows) acc[r][v].store(sums[r] + v * kLanes);
    }
    for (int v = 0; v * kLanes < cols; ++v)
      requant_rows(g, sums[0] + v * kLanes, V * kLanes, i, col + v * kLanes, cols - v * kLanes, rows);
    return;
  }
#pragma GCC unroll 8
  for (int v = 0; v < V; ++v) {
    const int64_t left = cols - v * kLanes, c0 = col + v * kLanes;
    if (left <= 0) break;
    if (g.c32) {
      int32_t* c = g.c32 + i * g.ldc + c0;
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r, c += g.ldc) {
        if (r >= rows) break;
        left >= kLanes ? acc[r][v].store(c) : acc[r][v].store_tail(c, left);
      }
    } else {
      const VecF scale = VecF::load(g.c_scale + c0), bias = g.c_bias ? VecF::load(g.c_bias + c0) : VecF::zero();
      const VecF lo = VecF::splat(g.c_lo), hi = VecF::splat(g.c_hi);
      float* c = g.cf + i * g.ldc + c0;
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r, c += g.ldc) {
        if (r >= rows) break;
        VecF y = to_f32(acc[r][v]) * scale;
        if (g.c_bias) y = y + bias;
        y = clamp(y, lo, hi);
        left >= kLanes ? y.store(c) : y.store_tail(c, left);
      }
    }
  }
}

// C tile rows [i, i + R), panels [p, p + P). a: the tile's first packed row (see pack_a).
template <int R, int P>
void tile(const GemmS8Args& g, const int8_t* a, const int32_t* row_term, int64_t i, int64_t p) {
  constexpr int kV = P * kNv;
  constexpr int64_t kChunkGroups = kGemmS8Kc / kGemmS8Kr;
  const int64_t groups = (g.k + kGemmS8Kr - 1) / kGemmS8Kr, panel = groups * kGroupBytes;
  const int64_t col = p * kGemmS8Nr, cols = min_i(P * kGemmS8Nr, g.n - col);
  // dot4 sums (a + kDotAOffset) · b: a_zp and the offset both come off through Σ_k b, with the
  // bias, in the accumulators' start value (columns past n are zero-padded).
  const VecI32 a_shift = VecI32::splat(g.a_zp + kDotAOffset);
  VecI32 acc[R][kV];
#pragma GCC unroll 16
  for (int v = 0; v < kV; ++v) {
    const int64_t c0 = col + v * kLanes;
    acc[0][v] = VecI32::load(g.bias + c0) - a_shift * VecI32::load(g.b_sum + c0);
#pragma GCC unroll 16
    for (int r = 1; r < R; ++r) acc[r][v] = acc[0][v];
  }
  const int8_t* b = g.b_packed + p * panel;
  for (int64_t q0 = 0; q0 < groups; q0 += kChunkGroups, a += kMr * kGemmS8ChunkStride) {
    const int8_t* ag = a;
    for (int64_t q = q0; q < min_i(q0 + kChunkGroups, groups); ++q, b += kGroupBytes, ag += kGemmS8Kr) {
      VecI8 bv[kV];
#pragma GCC unroll 16
      for (int t = 0; t < P; ++t) {
        // The hardware prefetcher alone left 1024^3 at 67 % of the vpdpbusd peak, 83 % with this.
        __builtin_prefetch(b + t * panel + 16 * kGroupBytes);
#pragma GCC unroll 16
        for (int v = 0; v < kNv; ++v) bv[t * kNv + v] = VecI8::load(b + t * panel + v * VecI8::kBytes);
      }
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const VecI8 av = VecI8::splat4(ag + r * kGemmS8ChunkStride);
#pragma GCC unroll 16
        for (int v = 0; v < kV; ++v) acc[r][v] = dot4(acc[r][v], av, bv[v]);
      }
    }
  }
  finish(g, acc, row_term, i, col, cols, R);
}

// Panels [pb, pe) of row tile i (R rows): kPt panels at a time, a lone last panel on its own.
template <int R>
void row_tile(const GemmS8Args& g, const int8_t* a, const int32_t* row_term, int64_t i, int64_t pb, int64_t pe) {
  int64_t p = pb;
  if constexpr (kPt > 1)
    for (; p + kPt <= pe; p += kPt) tile<R, kPt>(g, a, row_term, i, p);
  for (; p < pe; ++p) tile<R, 1>(g, a, row_term, i, p);
}

template <int R>
void row_tile_of(int rows, const GemmS8Args& g, const int8_t* a, const int32_t* row_term, int64_t i, int64_t pb,
                 int64_t pe) {
  if (rows == R)
    row_tile<R>(g, a, row_term, i, pb, pe);
  else if constexpr (R > 1)
    row_tile_of<R - 1>(rows, g, a, row_term, i, pb, pe);
}

}  // namespace

void gemm_s8(const GemmS8Args& g, int64_t m0, int64_t m1, int64_t p0, int64_t p1, int8_t* scratch) {
  int32_t* row_term = reinterpret_cast<int32_t*>(scratch + gemm_s8_scratch_bytes(g.k, kMr) - 4 * kMr);
  const int64_t panel_bytes = (g.k + kGemmS8Kr - 1) / kGemmS8Kr * kGroupBytes;
  const int64_t block = max_i(kPt, kBlockBytes / max_i(panel_bytes, 1) / kPt * kPt);
  for (int64_t pb = p0; pb < p1; pb += block) {
    const int64_t pe = min_i(pb + block, p1);
    for (int64_t i = m0; i < m1; i += kMr) {
      const int rows = static_cast<int>(min_i(kMr, m1 - i));
      g.b_zp ? pack_a<true>(g, i, rows, scratch, row_term) : pack_a<false>(g, i, rows, scratch, row_term);
      row_tile_of<kMr>(rows, g, scratch, row_term, i, pb, pe);
    }
  }
}

void gemm_s8_pack(const int8_t* b, int64_t ldb, bool transposed, int64_t n, int64_t k, int8_t* dst, int32_t* b_sum) {
  const int64_t panels = (n + kGemmS8Nr - 1) / kGemmS8Nr, groups = (k + kGemmS8Kr - 1) / kGemmS8Kr;
  for (int64_t p = 0; p < panels; ++p)
    for (int64_t j = 0; j < kGemmS8Nr; ++j) {
      const int64_t col = p * kGemmS8Nr + j;
      uint32_t sum = 0;  // wraps like r1.1's int32 sums
      for (int64_t kk = 0; kk < groups * kGemmS8Kr; ++kk) {
        const int8_t x = col >= n || kk >= k ? 0 : transposed ? b[col * ldb + kk] : b[kk * ldb + col];
        dst[(p * groups + kk / kGemmS8Kr) * kGroupBytes + j * kGemmS8Kr + kk % kGemmS8Kr] = x;
        sum += static_cast<uint32_t>(x);
      }
      b_sum[col] = static_cast<int32_t>(sum);
    }
}

MSV0_EXPORT_CONFIG(gemm_s8, &gemm_s8, kMr, kPt * kGemmS8Nr, kGemmS8Kr, &gemm_s8_pack)
}  // namespace MSV0_ISA
}  // namespace msv0

#if defined(__AVX512VNNI__)
MSV0_TARGET_PUSH("amx-tile,amx-int8")
#include "simd/amx.h"

namespace msv0 {
namespace MSV0_ISA {
namespace {

// Tiles 0-3: C rows [0, 16) x panels 0, 1 and rows [16, 32) x panels 0, 1; 4-5: A's two row
// halves; 6-7: the two panels. A step is one tile of k: 16 groups of a panel, 64 bytes of a row
// of A, so a panel's groups are a B tile's rows as they lie (stride 64 bytes).
constexpr int kAmxMr = 32;
constexpr int64_t kAmxStep = 64;
static_assert(kGemmS8Kc % kAmxStep == 0 && VecI8::kBytes == kAmxStep, "a step lies in one chunk of packed A");
static_assert(kGemmS8PackSlack == (kAmxStep / kGemmS8Kr - 1) * kGroupBytes, "a last step reads 15 groups past k");
// Below this many rows per call most of a 16-row tile multiplies stale rows, below this k most of
// a step multiplies zeros, and at this n or less one panel pair holds all of C: vpdpbusd is
// faster (MobileNetV2's 1x1 convs 16 -> 96 and 32 -> 16, its 3x3 stem with k 27, 96 -> 24).
constexpr int64_t kAmxMinRows = 16, kAmxMinK = 32, kAmxMaxPlainN = 2 * kGemmS8Nr;

// Rows [i, i + rows) of A into dst in pack_a's chunk layout (kAmxMr rows per chunk), unshifted
// (tdpbssd multiplies int8 by int8), the last chunk zero-padded to a whole step: the last step's
// B tile reads up to 15 groups past the panel's k (into the next panel or the packer's slack),
// and these zeros cancel them. With Sums (some b_zp is not 0), row_term[r] = Σ_k A[i + r, k] −
// k · a_zp, wrapping.
template <bool Sums>
void amx_pack_a(const GemmS8Args& g, int64_t i, int rows, int8_t* dst, int32_t* row_term) {
  static const int8_t kOnes[4] = {1, 1, 1, 1};
  const VecI8 ones = VecI8::splat4(kOnes);
  const int64_t chunks = (g.k + kGemmS8Kc - 1) / kGemmS8Kc;
  for (int r = 0; r < rows; ++r) {
    VecI32 sum = VecI32::zero();
    for (int64_t c = 0; c < chunks; ++c) {
      const int8_t* src = g.a + (i + r) * g.lda + c * kGemmS8Kc;
      int8_t* d = dst + (c * kAmxMr + r) * kGemmS8ChunkStride;
      const int64_t n = min_i(kGemmS8Kc, g.k - c * kGemmS8Kc);
      for (int64_t kk = 0; kk < n; kk += kAmxStep) {
        const VecI8 x = n - kk >= kAmxStep ? VecI8::load(src + kk) : VecI8::load_tail(src + kk, n - kk);
        x.store(d + kk);
        if constexpr (Sums) sum = dot4(sum, ones, x);
      }
    }
    if constexpr (Sums)
      row_term[r] = static_cast<int32_t>(static_cast<uint32_t>(reduce_add(sum)) -
                                         static_cast<uint32_t>(g.k) * static_cast<uint32_t>(g.a_zp));
  }
}

// Where step s of a tile's rows of A starts, and their stride: pack_a's chunks (Packed) or
// rows in place (InPlace, gemm_s8_amx_strided).
struct Packed {
  const int8_t* a;
  static constexpr int64_t kStepsPerChunk = kGemmS8Kc / kAmxStep;
  const int8_t* step(int64_t s) const {
    return a + s / kStepsPerChunk * kAmxMr * kGemmS8ChunkStride + s % kStepsPerChunk * kAmxStep;
  }
  static constexpr int64_t stride() { return kGemmS8ChunkStride; }
};
struct InPlace {
  const int8_t* a;
  const int64_t* step_off;
  int64_t row_stride;
  const int8_t* step(int64_t s) const { return a + step_off[s]; }
  int64_t stride() const { return row_stride; }
};

// The products of a 16- or 32-row tile of A (rows) and panels p, p + 1 (p twice when p + 1
// == pe), left in tiles 0-3. Packed rows past the tile's real ones are stale; their rows of C
// are never stored.
template <bool kTwoHalves, class Rows>
void amx_products(const GemmS8Args& g, const Rows& rows, int64_t p, int64_t pe) {
  const int64_t panel = (g.k + kGemmS8Kr - 1) / kGemmS8Kr * kGroupBytes, steps = (g.k + kAmxStep - 1) / kAmxStep;
  const int8_t* b0 = g.b_packed + p * panel;
  const int8_t* b1 = p + 1 < pe ? b0 + panel : b0;
  constexpr int64_t kBStep = kAmxStep / kGemmS8Kr * kGroupBytes;
  const int64_t stride = rows.stride();
  _tile_zero(0);
  _tile_zero(1);
  if (kTwoHalves) {
    _tile_zero(2);
    _tile_zero(3);
  }
  for (int64_t s = 0; s < steps; ++s) {
    const int8_t* as = rows.step(s);
    _tile_loadd(4, as, stride);
    _tile_loadd(6, b0 + s * kBStep, kGroupBytes);
    _tile_loadd(7, b1 + s * kBStep, kGroupBytes);
    _tile_dpbssd(0, 4, 6);
    _tile_dpbssd(1, 4, 7);
    if (kTwoHalves) {
      _tile_loadd(5, as + 16 * stride, stride);
      _tile_dpbssd(2, 5, 6);
      _tile_dpbssd(3, 5, 7);
    }
  }
}

using AmxC = int32_t[kAmxMr][2 * kGemmS8Nr];

// Tiles 0-3 into c, rows [0, 16) and, with two halves, [16, 32).
void amx_store(AmxC& c, bool two_halves) {
  _tile_stored(0, &c[0][0], sizeof c[0]);
  _tile_stored(1, &c[0][16], sizeof c[0]);
  if (two_halves) {
    _tile_stored(2, &c[16][0], sizeof c[0]);
    _tile_stored(3, &c[16][16], sizeof c[0]);
  }
}

// C rows [i, i + rows) x panels p, p + 1 from their stored products c (see finish).
void amx_finish(const GemmS8Args& g, const AmxC& c, const int32_t* row_term, int64_t i, int rows, int64_t p,
                int64_t pe) {
  // The tiles start at 0: bias − a_zp · Σ_k b is added here (int32 sums wrap, so the order is free).
  const int64_t col = p * kGemmS8Nr, cols = min_i(min_i(pe - p, 2) * kGemmS8Nr, g.n - col);
  const VecI32 a_zp = VecI32::splat(g.a_zp);
  VecI32 start[2] = {VecI32::zero(), VecI32::zero()};
  for (int v = 0; v < min_i(pe - p, 2); ++v)  // per-column arrays end at the last whole panel
    start[v] = VecI32::load(g.bias + col + v * kLanes) - a_zp * VecI32::load(g.b_sum + col + v * kLanes);
  for (int h = 0; h * 16 < rows; ++h) {
    VecI32 acc[16][2];
    for (int r = 0; r < 16; ++r)
      for (int v = 0; v < 2; ++v) acc[r][v] = VecI32::load(&c[16 * h + r][v * kLanes]) + start[v];
    finish(g, acc, row_term + 16 * h, i + 16 * h, col, cols, static_cast<int>(min_i(16, rows - 16 * h)));
  }
}

}  // namespace

// One tile behind: a tile's vector epilogue runs after the next tile's tdpbssd are issued, so
// the vector ports requantize while the tile unit multiplies (the epilogue costs about as much
// as the products at ResNet-50's sizes). Hence two product buffers and two sets of row sums.
void gemm_s8_amx(const GemmS8Args& g, int64_t m0, int64_t m1, int64_t p0, int64_t p1, int8_t* scratch) {
  if (m1 - m0 < kAmxMinRows || g.k < kAmxMinK || g.n <= kAmxMaxPlainN) return gemm_s8(g, m0, m1, p0, p1, scratch);
  alignas(64) AmxC c[2];
  int32_t row_terms[2][kAmxMr];
  struct Pending {
    int64_t i = -1, p = 0, pe = 0;
    int rows = 0, buf = 0, terms = 0;
  } last;
  const int64_t panel_bytes = (g.k + kGemmS8Kr - 1) / kGemmS8Kr * kGroupBytes;
  const int64_t block = max_i(2, kBlockBytes / max_i(panel_bytes, 1) / 2 * 2);
  int buf = 0, terms = 0;
  amx_configure();
  for (int64_t pb = p0; pb < p1; pb += block) {
    const int64_t pe = min_i(pb + block, p1);
    for (int64_t i = m0; i < m1; i += kAmxMr, terms ^= 1) {
      const int rows = static_cast<int>(min_i(kAmxMr, m1 - i));
      if (g.b_zp)
        amx_pack_a<true>(g, i, rows, scratch, row_terms[terms]);
      else
        amx_pack_a<false>(g, i, rows, scratch, row_terms[terms]);
      for (int64_t p = pb; p < pe; p += 2, buf ^= 1) {
        const Packed packed{scratch};
        rows > 16 ? amx_products<true>(g, packed, p, pe) : amx_products<false>(g, packed, p, pe);
        if (last.i >= 0) amx_finish(g, c[last.buf], row_terms[last.terms], last.i, last.rows, last.p, last.pe);
        amx_store(c[buf], rows > 16);
        last = {i, p, pe, rows, buf, terms};
      }
    }
  }
  if (last.i >= 0) amx_finish(g, c[last.buf], row_terms[last.terms], last.i, last.rows, last.p, last.pe);
  amx_release();
}

// Tiles of 32 rows (of 16 when m < 32), the last one ending at m and overlapping rows already
// done (they are computed again, identically): every tile is whole, so none reads rows of A
// past the caller's m, and a 32-row tile loads a tile of A or B per product where a 16-row one
// loads 1.5. The finishing runs one tile behind, as in gemm_s8_amx.
void gemm_s8_amx_strided(const GemmS8Args& g, const int64_t* step_off, int64_t row_stride, int64_t p0, int64_t p1) {
  alignas(64) AmxC c[2];
  static const int32_t kNoRowTerm[kAmxMr] = {};  // symmetric B: finish reads no row sums
  struct Pending {
    int64_t i = -1, p = 0, pe = 0;
    int rows = 0, buf = 0;
  } last;
  const int64_t panel_bytes = g.k / kGemmS8Kr * kGroupBytes;
  const int64_t block = max_i(2, kBlockBytes / max_i(panel_bytes, 1) / 2 * 2);
  int buf = 0;
  amx_configure();
  for (int64_t pb = p0; pb < p1; pb += block) {
    const int64_t pe = min_i(pb + block, p1);
    for (int64_t i = 0; i < g.m;) {
      const int rows = g.m >= kAmxMr ? kAmxMr : 16;
      const int64_t at = min_i(i, g.m - rows);
      const InPlace tile_rows{g.a + at * row_stride, step_off, row_stride};
      for (int64_t p = pb; p < pe; p += 2, buf ^= 1) {
        rows > 16 ? amx_products<true>(g, tile_rows, p, pe) : amx_products<false>(g, tile_rows, p, pe);
        if (last.i >= 0) amx_finish(g, c[last.buf], kNoRowTerm, last.i, last.rows, last.p, last.pe);
        amx_store(c[buf], rows > 16);
        last = {at, p, pe, rows, buf};
      }
      i = at + rows;
    }
  }
  if (last.i >= 0) amx_finish(g, c[last.buf], kNoRowTerm, last.i, last.rows, last.p, last.pe);
  amx_release();
}

MSV0_EXPORT_CONFIG(gemm_s8_amx, &gemm_s8_amx, kAmxMr, 2 * kGemmS8Nr, kGemmS8Kr, &gemm_s8_pack, &gemm_s8_amx_strided)
}  // namespace MSV0_ISA
}  // namespace msv0
MSV0_TARGET_POP
#endif  // __AVX512VNNI__

#else  // binding pass
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <pybind11/stl.h>

#include "kernels/quant_cast.h"
#include "runtime/native.h"
#include "runtime/weight_memory.h"

namespace msv0 {

// The AMX slot asks the OS for the tile state here, on first use, and yields to the plain one
// where the OS refuses.
const GemmS8Kernel& gemm_s8_kernel() { return amx_or_plain(gemm_s8_amx_slots(), Amx::kInt8, gemm_s8_slots()); }

namespace {

// g on the pool: rows split when there are enough of them, else panels (a batch-1
// FullConnection), in whole micro-kernel tiles of the slot's width.
void run_gemm_s8(const GemmS8Kernel& kernel, const GemmS8Args& g) {
  const int64_t panels = (g.n + kGemmS8Nr - 1) / kGemmS8Nr;
  const size_t scratch_floats = static_cast<size_t>(gemm_s8_scratch_bytes(g.k, kernel.mr) + 3) / 4;
  auto task = [&](int64_t m0, int64_t m1, int64_t p0, int64_t p1) {
    kernel.fn(g, m0, m1, p0, p1, reinterpret_cast<int8_t*>(thread_scratch(scratch_floats)));
  };
  const int64_t tile = kernel.nr / kGemmS8Nr, tiles = (panels + tile - 1) / tile;
  if (g.m >= 4 * panels || g.m >= 64)
    parallel_for(g.m, kernel.mr, [&](int64_t m0, int64_t m1) { task(m0, m1, 0, panels); });
  else
    parallel_for(tiles, 1, [&](int64_t t0, int64_t t1) { task(0, g.m, t0 * tile, std::min(t1 * tile, panels)); });
}

// Rows of m x k elements and output rows of n from FullConnection's shapes: x of any shape
// holding m rows of k, y of m rows of n. Returns m.
int64_t fc_rows(const std::vector<int64_t>& x_shape, const std::vector<int64_t>& y_shape, int64_t n, int64_t k) {
  checked_shape(x_shape, x_shape.size(), "x_shape");
  checked_shape(y_shape, y_shape.size(), "y_shape");
  if (y_shape.empty() || y_shape.back() != n) throw ArgError("y_shape: last dim must be " + std::to_string(n));
  const int64_t m = elements(std::vector<int64_t>(y_shape.begin(), y_shape.end() - 1));
  if (elements(x_shape) != m * k)
    throw ArgError("x_shape: expected " + std::to_string(m) + " rows of " + std::to_string(k));
  return m;
}

}  // namespace

// An int8 GEMM with B packed once, on x of a fixed (m, k): the weight of an int8
// FullConnection, MatMul or convolution. With mult/left/right it writes requantized int8,
// without them the int32 accumulators.
class GemmS8 : public NativeOp {
 public:
  GemmS8(const py::array& b, bool transposed, int64_t a_zp, const py::array& b_zp, std::optional<py::array> bias,
         std::optional<py::array> mult, std::optional<py::array> left, std::optional<py::array> right, int64_t c_zp,
         int64_t lo, int64_t hi, const std::vector<int64_t>& x_shape,
         const std::optional<std::vector<int64_t>>& y_shape)
      : kernel_(gemm_s8_kernel()), a_zp_(int8_param(a_zp, "a_zp")), c_zp_(int8_param(c_zp, "c_zp")),
        lo_(int8_param(lo, "lo")), hi_(int8_param(hi, "hi")) {
    if (b.ndim() != 2) throw ArgError("b: expected a 2-D array");
    const int8_t* pb = in_ptr<int8_t>(b, "b");
    n_ = transposed ? b.shape(0) : b.shape(1);
    k_ = transposed ? b.shape(1) : b.shape(0);
    if (y_shape) {
      m_ = fc_rows(x_shape, *y_shape, n_, k_);
    } else if (x_shape.size() != 2 || x_shape[1] != k_ || x_shape[0] < 0) {
      throw ArgError("x_shape: expected (m, " + std::to_string(k_) + ")");
    } else {
      m_ = x_shape[0];
    }
    const int64_t padded = (n_ + kGemmS8Nr - 1) / kGemmS8Nr * kGemmS8Nr;
    b_zp_ = padded_int32(b_zp, n_, padded, "b_zp");
    for (int64_t j = 0; j < n_; ++j) int8_param(b_zp_[j], "b_zp");
    symmetric_ = std::all_of(b_zp_.begin(), b_zp_.end(), [](int32_t z) { return z == 0; });
    bias_ = bias ? padded_int32(*bias, n_, padded, "bias") : std::vector<int32_t>(padded, 0);
    if (mult || left || right) {
      if (!(mult && left && right)) throw ArgError("requantization needs mult, left and right");
      mult_ = padded_int32(*mult, n_, padded, "mult");
      left_ = padded_int32(*left, n_, padded, "left");
      right_ = padded_int32(*right, n_, padded, "right");
      for (int64_t j = 0; j < n_; ++j) check_requant(mult_[j], left_[j], right_[j], "requantization");
    }
    if (lo_ > hi_) throw ArgError("lo must be <= hi");
    packed_.resize(static_cast<size_t>(gemm_s8_packed_size(n_, k_)));
    b_sum_.resize(static_cast<size_t>(padded));
    kernel_.pack(pb, b.shape(1), transposed, n_, k_, packed_.data(), b_sum_.data());
    set_operands({{x_shape, 'b'}}, {{y_shape ? *y_shape : std::vector<int64_t>{m_, n_}, mult_.empty() ? 'i' : 'b'}});
  }

  void run(const void* const* in, void* const* out) const override {
    const bool requant = !mult_.empty();
    GemmS8Args g{static_cast<const int8_t*>(in[0]), k_, packed_.data(), b_sum_.data(), symmetric_ ? nullptr : b_zp_.data(), bias_.data(),
                 requant ? mult_.data() : nullptr, requant ? left_.data() : nullptr,
                 requant ? right_.data() : nullptr, a_zp_, c_zp_, lo_, hi_,
                 requant ? nullptr : static_cast<int32_t*>(out[0]),
                 requant ? static_cast<int8_t*>(out[0]) : nullptr, n_, m_, n_, k_};
    run_gemm_s8(kernel_, g);
  }

  const char* name() const override { return "gemm_s8"; }

 private:
  const GemmS8Kernel& kernel_;  // the slot of the tier active at construction, which packed B
  int32_t a_zp_, c_zp_, lo_, hi_;
  int64_t m_ = 0, n_ = 0, k_ = 0;
  bool symmetric_ = false;  // every b_zp is 0: the kernel skips the b_zp · row-sum term
  WeightVector<int8_t> packed_;
  std::vector<int32_t> b_sum_, b_zp_, bias_, mult_, left_, right_;
};

// A FullConnection on dynamically quantized input: ONNX's DynamicQuantizeLinear + MatMulInteger
// as the converter lowers them, fused at plan time (msv0.dynamic_quant). Inputs: xq, float32
// integers in [0, 255], m rows of k; zp, one float32 integer in [0, 255]; scale, 1 or n float32.
// y = clamp(float(Σ_k (xq − zp) · (B[n, k] − b_zp[n])) · scale[n] (+ bias[n]), lo, hi), float32:
// the lowered float32 steps' result wherever their sums are exact (below 2^24), ONNX Runtime's
// int32 one everywhere.
class GemmS8Dynamic : public NativeOp {
 public:
  GemmS8Dynamic(const py::array& b, const py::array& b_zp, std::optional<py::array> bias,
                const std::vector<int64_t>& x_shape, const std::vector<int64_t>& zp_shape,
                const std::vector<int64_t>& scale_shape, const std::vector<int64_t>& y_shape, float lo, float hi)
      : kernel_(gemm_s8_kernel()), lo_(lo), hi_(hi) {
    if (b.ndim() != 2) throw ArgError("b: expected a 2-D array [n, k]");
    n_ = b.shape(0), k_ = b.shape(1);
    m_ = fc_rows(x_shape, y_shape, n_, k_);
    if (elements(checked_shape(zp_shape, zp_shape.size(), "zp_shape")) != 1)
      throw ArgError("zp_shape: expected one value");
    scales_ = elements(checked_shape(scale_shape, scale_shape.size(), "scale_shape"));
    if (scales_ != 1 && scales_ != n_) throw ArgError("scale_shape: expected 1 or " + std::to_string(n_) + " values");
    const int64_t padded = (n_ + kGemmS8Nr - 1) / kGemmS8Nr * kGemmS8Nr;
    packed_.resize(static_cast<size_t>(gemm_s8_packed_size(n_, k_)));
    b_sum_.resize(static_cast<size_t>(padded));
    bias_.assign(static_cast<size_t>(padded), 0);
    b_zp_ = padded_int32(b_zp, n_, padded, "b_zp");
    for (int64_t j = 0; j < n_; ++j) int8_param(b_zp_[j], "b_zp");
    if (std::all_of(b_zp_.begin(), b_zp_.end(), [](int32_t z) { return z == 0; })) b_zp_.clear();
    if (bias) {
      expect_shape(*bias, {n_}, "bias");
      const float* p = in_ptr<float>(*bias, "bias");
      c_bias_.assign(p, p + n_);
      c_bias_.resize(static_cast<size_t>(padded), 0.f);
    }
    kernel_.pack(in_ptr<int8_t>(b, "b"), k_, true, n_, k_, packed_.data(), b_sum_.data());
    set_operands({{x_shape, 'f'}, {zp_shape, 'f'}, {scale_shape, 'f'}}, {{y_shape, 'f'}});
  }

  void run(const void* const* in, void* const* out) const override {
    const auto* s = static_cast<const float*>(in[2]);
    // xq and zp are integers in [0, 255]: the matcher checks that their steps make them so.
    std::unique_ptr<int8_t[]> a(new int8_t[static_cast<size_t>(m_ * k_)]);
    const int8_t a_zp = codes_to_s8(in[0], m_ * k_, in[1], a.get());
    const int64_t padded = static_cast<int64_t>(bias_.size());
    std::vector<float> scale(static_cast<size_t>(padded), 0.f);
    for (int64_t j = 0; j < n_; ++j) scale[j] = s[scales_ == 1 ? 0 : j];
    GemmS8Args g{a.get(), k_, packed_.data(), b_sum_.data(), b_zp_.empty() ? nullptr : b_zp_.data(), bias_.data(),
                 nullptr, nullptr, nullptr, a_zp, 0, -128, 127, nullptr, nullptr, n_, m_, n_, k_};
    g.cf = static_cast<float*>(out[0]);
    g.c_scale = scale.data();
    g.c_bias = c_bias_.empty() ? nullptr : c_bias_.data();
    g.c_lo = lo_, g.c_hi = hi_;
    run_gemm_s8(kernel_, g);
  }

  const char* name() const override { return "gemm_s8_dynamic"; }

 private:
  const GemmS8Kernel& kernel_;
  float lo_, hi_;
  int64_t m_ = 0, n_ = 0, k_ = 0, scales_ = 1;
  WeightVector<int8_t> packed_;
  std::vector<int32_t> b_sum_, bias_;  // bias_: the int32 one, zeros (whole panels)
  std::vector<int32_t> b_zp_;  // whole panels, or empty when every column's is 0
  std::vector<float> c_bias_;  // the float one added after the scale: n values then zeros, or none
};

MSV0_BIND(m) {
  m.def("gemm_s8_tile", [] { const GemmS8Kernel& c = gemm_s8_kernel(); return py::make_tuple(c.mr, c.nr); },
        "(mr, nr) of the int8 GEMM that kernel objects built now take: (32, 32) on AMX, else the tier's.");
  py::class_<GemmS8, NativeOp, std::shared_ptr<GemmS8>>(
      m, "GemmS8",
      "int8 GEMM, r1.1 arithmetic, on x of x_shape (m, k): acc = (x - a_zp) · (B - b_zp) + bias per column;\n"
      "y (m, n) = acc as int32, or with mult/left/right clamp(RDBPOT(SRDHM(acc · 2^left, mult), right) + c_zp,\n"
      "lo, hi) as int8, per column. B is k x n, or n x k when transposed, packed once. With y_shape (last dim\n"
      "n, m rows), x_shape may be any shape of m·k elements and y has y_shape.")
      .def(py::init<const py::array&, bool, int64_t, const py::array&, std::optional<py::array>,
                    std::optional<py::array>, std::optional<py::array>, std::optional<py::array>, int64_t, int64_t,
                    int64_t, const std::vector<int64_t>&, const std::optional<std::vector<int64_t>>&>(),
           py::arg("b"), py::arg("transposed"), py::arg("a_zp"), py::arg("b_zp"), py::arg("bias") = py::none(),
           py::arg("mult") = py::none(), py::arg("left") = py::none(), py::arg("right") = py::none(),
           py::arg("c_zp") = 0, py::arg("lo") = -128, py::arg("hi") = 127, py::arg("x_shape"),
           py::arg("y_shape") = py::none());
  py::class_<GemmS8Dynamic, NativeOp, std::shared_ptr<GemmS8Dynamic>>(
      m, "GemmS8Dynamic",
      "FullConnection on dynamically quantized x: inputs xq (float32 integers in [0, 255], m rows of k), zp\n"
      "(one float32 integer in [0, 255]) and scale (1 or n float32); y = float(Σ_k (xq − zp) · (b[n, k] − b_zp[n]))\n"
      "· scale[n] (+ bias[n], float32), clamped to [lo, hi], float32, from int32 sums, rounded after the product and\n"
      "after the sum. b: int8 [n, k], packed once; b_zp: n int32 in int8's range.")
      .def(py::init<const py::array&, const py::array&, std::optional<py::array>, const std::vector<int64_t>&,
                    const std::vector<int64_t>&, const std::vector<int64_t>&, const std::vector<int64_t>&, float,
                    float>(),
           py::arg("b"), py::arg("b_zp"), py::arg("bias"), py::arg("x_shape"), py::arg("zp_shape"),
           py::arg("scale_shape"), py::arg("y_shape"), py::arg("lo") = -INFINITY, py::arg("hi") = INFINITY);
}

}  // namespace msv0
#endif
