// The opt-in bf16 GEMM (Session precision="bf16"): the SGEMM contract of gemm_f32.h with B
// rounded to bf16 once by its packer and A rounded to bf16 while a block of it is packed;
// products are exact and sums float. Two kernels, each filling the slot of one tier only on
// CPUs that have its instructions (simd/avx512_bf16.h: a feature of this one kernel, not a
// tier), so below the avx512 tier, and on other CPUs, the slot reads as empty and callers fall
// back to the fp32 slot:
//   avx512      vdpbf16ps, a 12 x 32 tile of C in registers (AVX512-BF16);
//   avx512vnni  AMX tiles, 32 x 32 of C in four tile registers, in the sgemm_bf16_amx slot
//               (used where amx_usable(Amx::kBf16)); otherwise the avx512 slot serves this tier.
//
// Layout: B in panels of kGemmNr columns, k-blocked by kKc as in gemm_f32.h, but each panel
// row is a k pair: 16 32-bit lanes, lane j holding B[k, j] (low half) and B[k + 1, j], zero
// past k. Packed A is the same pairs along each row, so one 32-bit lane of A meets one panel
// row. The AMX kernel pads each block's pairs to a multiple of 16 (one tile's depth).
#include "kernels/gemm_f32.h"

#include "kernels/kernel.h"
#include "simd/pragmas.h"

namespace msv0 {
MSV0_DECLARE(sgemm_bf16, SgemmConfig)
MSV0_DECLARE(sgemm_bf16_amx, SgemmConfig)
bool cpu_has_avx512bf16();  // runtime/cpu_features.cc
}  // namespace msv0

#if !MSV0_ONCE
#if defined(__AVX512F__)
#if defined(__AVX512VNNI__)
MSV0_TARGET_PUSH("avx512bf16,amx-tile,amx-bf16")
#else
MSV0_TARGET_PUSH("avx512bf16")
#endif
#include "simd/avx512_bf16.h"
#if defined(__AVX512VNNI__)
#include "simd/amx.h"
#endif

namespace msv0 {
namespace MSV0_ISA {
namespace {

#if defined(__AVX512VNNI__)
constexpr int kMr = 32;           // two tiles of 16 rows
constexpr int64_t kPairAlign = 16;  // a tile is 16 pairs deep
constexpr int64_t kChunk = 128;     // rows packed per k block: whole 32-row tiles
#else
constexpr int kMr = 12;  // 12 x 32: 24 accumulators, as the fp32 AVX-512 kernel (gemm_f32.cc)
constexpr int64_t kPairAlign = 1;
// Each value of A is rounded once per block, and each group of kPt panels is reused from L1
// by every row tile of the chunk.
constexpr int64_t kChunk = 120 / kMr * kMr;
#endif
constexpr int kPt = 2;
constexpr int64_t kKc = 512;            // k per block: a packed A row is 1 KiB of bf16
constexpr int64_t kLdA = kKc / 2 + 16;  // packed A row stride in pairs: 1 KiB + 64 B

// Pairs a k block of kc holds (kKc / 2 is a multiple of kPairAlign, so only the last pads).
int64_t block_pairs(int64_t kc) { return ((kc + 1) / 2 + kPairAlign - 1) / kPairAlign * kPairAlign; }
const uint32_t* panels_of(const GemmArgs& g) { return reinterpret_cast<const uint32_t*>(g.b_packed); }

// dst[r * kLdA + kk] = bf16 pair (A[i + r, k0 + 2kk], A[i + r, k0 + 2kk + 1]); zeros from kc
// to the block's padded pairs.
void pack_a(const GemmArgs& g, int64_t i, int rows, int64_t k0, int64_t kc, uint32_t* dst) {
  const int64_t kp = 2 * block_pairs(kc);
  for (int r = 0; r < rows; ++r) {
    const float* src = g.a + (i + r) * g.lda + k0;
    uint32_t* d = dst + r * kLdA;
    int64_t kk = 0;
    for (; kk + 32 <= kc; kk += 32, d += 16) to_bf16(VecF::load(src + kk), VecF::load(src + kk + 16)).store(d);
    for (; kk < kp; kk += 32, d += 16) {
      const int64_t left = max_i(0, kc - kk);
      const VecF lo = left > 0 ? VecF::load_tail(src + kk, min_i(left, 16)) : VecF::zero();
      const VecF hi = left > 16 ? VecF::load_tail(src + kk + 16, left - 16) : VecF::zero();
      to_bf16(lo, hi).store(d);
    }
  }
}

#if defined(__AVX512VNNI__)
// acc (rows x cols of C at row i, column col; row r at acc + r * ld) finished: the partial C
// of earlier k blocks added, and on the last block bias and clamp.
void epilogue(const GemmArgs& g, const float* acc, int64_t ld, int64_t i, int rows, int64_t col, int64_t cols,
              bool first, bool last) {
  const VecF lo = VecF::splat(g.lo), hi = VecF::splat(g.hi);
  for (int64_t j = 0; j < cols; j += VecF::kLanes) {
    const int64_t left = min_i(VecF::kLanes, cols - j);
    const VecF bias = last && g.bias ? VecF::load_tail(g.bias + col + j, left) : VecF::zero();
    for (int r = 0; r < rows; ++r) {
      VecF x = VecF::load(acc + r * ld + j);
      float* c = g.c + (i + r) * g.ldc + col + j;
      if (!first) x = x + VecF::load_tail(c, left);
      if (last) x = clamp(x + bias, lo, hi);
      x.store_tail(c, left);
    }
  }
}

// Tiles 0-3: C rows [0, 16) x panels 0, 1 and rows [16, 32) x panels 0, 1; 4-5: A's two row
// halves; 6-7: the two panels (simd/amx.h's 16 x 64-byte tiles).
// Rows [i, i + 32) of the packed chunk a (stale rows past the chunk's end only feed rows of C
// that are not stored) against panels p, p + 1 (p alone when it is the last).
void amx_tile(const GemmArgs& g, const uint32_t* a, int64_t i, int rows, int64_t p, int64_t p1, int64_t k0,
              int64_t kc) {
  const int64_t panels = (g.n + kGemmNr - 1) / kGemmNr, kc2 = block_pairs(kc), panel = kc2 * kGemmNr;
  const uint32_t* b0 = panels_of(g) + k0 / 2 * panels * kGemmNr + p * panel;
  const uint32_t* b1 = p + 1 < panels ? b0 + panel : b0;
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t kk = 0; kk < kc2; kk += 16) {
    _tile_loadd(4, a + kk, kLdA * 4);
    _tile_loadd(5, a + 16 * kLdA + kk, kLdA * 4);
    _tile_loadd(6, b0 + kk * kGemmNr, kGemmNr * 4);
    _tile_loadd(7, b1 + kk * kGemmNr, kGemmNr * 4);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  alignas(64) float acc[32 * 32];
  _tile_stored(0, acc, 128);
  _tile_stored(1, acc + 16, 128);
  _tile_stored(2, acc + 16 * 32, 128);
  _tile_stored(3, acc + 16 * 32 + 16, 128);
  const int64_t col = p * kGemmNr, cols = min_i(min_i(p1, p + kPt) * kGemmNr, g.n) - col;
  epilogue(g, acc, 32, i, rows, col, cols, k0 == 0, k0 + kc == g.k);
}
#else
// C tile rows [i, i + R), panels [p, p + P), k block [k0, k0 + kc); a: packed A of its rows.
template <int R, int P>
void tile(const GemmArgs& g, const uint32_t* a, int64_t i, int64_t p, int64_t k0, int64_t kc) {
  const int64_t col = p * kGemmNr, cols = min_i(P * kGemmNr, g.n - col), kc2 = block_pairs(kc);
  const int64_t panel = kc2 * kGemmNr;  // distance between adjacent panels of this k block
  const uint32_t* b = panels_of(g) + k0 / 2 * ((g.n + kGemmNr - 1) / kGemmNr) * kGemmNr + p * panel;
  // Every loop over acc unrolled, so that it stays in registers (see gemm_f32.cc's tile).
  VecF acc[R][P];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int q = 0; q < P; ++q) acc[r][q] = VecF::zero();
  for (int64_t kk = 0; kk < kc2; ++kk, b += kGemmNr) {
    VecBf16x2 bv[P];
#pragma GCC unroll 16
    for (int q = 0; q < P; ++q) bv[q] = VecBf16x2::load(b + q * panel);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const VecBf16x2 av = VecBf16x2::splat(a + r * kLdA + kk);
#pragma GCC unroll 16
      for (int q = 0; q < P; ++q) acc[r][q] = dot2(acc[r][q], av, bv[q]);
    }
  }
  // epilogue()'s work, from the registers.
  const bool first = k0 == 0, last = k0 + kc == g.k;
  const VecF lo = VecF::splat(g.lo), hi = VecF::splat(g.hi);
#pragma GCC unroll 16
  for (int q = 0; q < P; ++q) {
    const int64_t left = cols - q * VecF::kLanes, c0 = col + q * VecF::kLanes;
    if (left <= 0) break;
    const VecF bias = last && g.bias ? VecF::load_tail(g.bias + c0, min_i(left, VecF::kLanes)) : VecF::zero();
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      float* c = g.c + (i + r) * g.ldc + c0;
      VecF x = acc[r][q];
      if (!first) x = x + (left >= VecF::kLanes ? VecF::load(c) : VecF::load_tail(c, left));
      if (last) x = clamp(x + bias, lo, hi);
      left >= VecF::kLanes ? x.store(c) : x.store_tail(c, left);
    }
  }
}

// Panels [pb, pe) of R rows: kPt panels at a time, a lone last panel on its own.
template <int R>
void row_tile(const GemmArgs& g, const uint32_t* a, int64_t i, int64_t pb, int64_t pe, int64_t k0, int64_t kc) {
  int64_t p = pb;
  for (; p + kPt <= pe; p += kPt) tile<R, kPt>(g, a, i, p, k0, kc);
  for (; p < pe; ++p) tile<R, 1>(g, a, i, p, k0, kc);
}

template <int R>
void row_tile_of(int rows, const GemmArgs& g, const uint32_t* a, int64_t i, int64_t pb, int64_t pe, int64_t k0,
                 int64_t kc) {
  if (rows == R)
    row_tile<R>(g, a, i, pb, pe, k0, kc);
  else if constexpr (R > 1)
    row_tile_of<R - 1>(rows, g, a, i, pb, pe, k0, kc);
}
#endif

}  // namespace

void sgemm_bf16(const GemmArgs& g, int64_t m0, int64_t m1, int64_t p0, int64_t p1) {
  if (g.k == 0) return sgemm_bias_only(g, m0, m1, p0, p1);
#if defined(__AVX512VNNI__)
  amx_configure();
#endif
  alignas(64) uint32_t packed_a[kChunk * kLdA];
  for (int64_t k0 = 0; k0 < g.k; k0 += kKc) {
    const int64_t kc = min_i(kKc, g.k - k0);
    for (int64_t c0 = m0; c0 < m1; c0 += kChunk) {
      const int64_t c1 = min_i(c0 + kChunk, m1);
      for (int64_t i = c0; i < c1; i += kMr)
        pack_a(g, i, static_cast<int>(min_i(kMr, c1 - i)), k0, kc, packed_a + (i - c0) * kLdA);
      for (int64_t p = p0; p < p1; p += kPt)
        for (int64_t i = c0; i < c1; i += kMr) {
          const int rows = static_cast<int>(min_i(kMr, c1 - i));
#if defined(__AVX512VNNI__)
          amx_tile(g, packed_a + (i - c0) * kLdA, i, rows, p, p1, k0, kc);
#else
          row_tile_of<kMr>(rows, g, packed_a + (i - c0) * kLdA, i, p, min_i(p + kPt, p1), k0, kc);
#endif
        }
    }
  }
#if defined(__AVX512VNNI__)
  amx_release();
#endif
}

// Writes bf16 pairs (see the layout above) into dst's 32-bit slots.
void sgemm_bf16_pack_b(const float* b, int64_t ldb, bool transposed, int64_t n, int64_t k, float* dst) {
  auto* out = reinterpret_cast<uint32_t*>(dst);
  const int64_t panels = (n + kGemmNr - 1) / kGemmNr;
  const auto at = [&](int64_t kk, int64_t col) {
    return col >= n || kk >= k ? 0.f : transposed ? b[col * ldb + kk] : b[kk * ldb + col];
  };
  for (int64_t k0 = 0; k0 < k; k0 += kKc)
    for (int64_t p = 0; p < panels; ++p)
      for (int64_t q = 0, kk = k0; q < block_pairs(min_i(kKc, k - k0)); ++q, kk += 2) {
        alignas(64) float even[kGemmNr], odd[kGemmNr];
        for (int64_t j = 0; j < kGemmNr; ++j) {
          even[j] = at(kk, p * kGemmNr + j);
          odd[j] = at(kk + 1, p * kGemmNr + j);
        }
        alignas(64) uint16_t h[2 * kGemmNr];  // even's 16 bf16, then odd's
        to_bf16(VecF::load(even), VecF::load(odd)).store(reinterpret_cast<uint32_t*>(h));
        for (int64_t j = 0; j < kGemmNr; ++j) *out++ = h[j] | static_cast<uint32_t>(h[kGemmNr + j]) << 16;
      }
}

// 32-bit slots (a float's size) of B packed for n x k: a pair of k per slot.
int64_t sgemm_bf16_packed_size(int64_t n, int64_t k) {
  int64_t pairs = 0;
  for (int64_t k0 = 0; k0 < k; k0 += kKc) pairs += block_pairs(min_i(kKc, k - k0));
  return (n + kGemmNr - 1) / kGemmNr * kGemmNr * pairs;
}

#if defined(__AVX512VNNI__)
// Tiles of 32 rows of C (16 when m < 32), the last one ending at m and overlapping rows already
// done (computed again, identically), so that no tile reads A past row m; C stays in tiles 0-3
// over all of k. B's k blocks (kKc) hold whole 16-pair tiles, as k is a multiple of 32. A pair
// of panels meets every row tile before the next pair, so that its k x 32 values of B are
// streamed into cache once (ResNet-50's 7x7 stage: 4.5 MiB of B, 61 rows).
void sgemm_bf16_amx_strided(const GemmArgs& g, const uint16_t* a, const int64_t* step_off, int64_t row_stride,
                            int64_t line, int64_t vw, int64_t ow, int64_t p0, int64_t p1) {
  const auto row_at = [&](int64_t j) { return a + j / vw * line + j % vw * row_stride; };
  const int64_t panels = (g.n + kGemmNr - 1) / kGemmNr, steps = g.k / 32, bytes = row_stride * 2;
  const int rows = g.m >= kMr ? kMr : 16;
  amx_configure();
  alignas(64) float acc[32 * 32];
  for (int64_t p = p0; p < p1; p += kPt)
    for (int64_t i = 0; i < g.m;) {
      const int64_t at = min_i(i, g.m - rows);
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      for (int64_t s = 0; s < steps; ++s) {
        const int64_t k0 = s * 32 / kKc * kKc, panel = block_pairs(min_i(kKc, g.k - k0)) * kGemmNr;
        const uint32_t* b0 = panels_of(g) + k0 / 2 * panels * kGemmNr + p * panel + (s * 32 - k0) / 2 * kGemmNr;
        const uint32_t* b1 = p + 1 < p1 ? b0 + panel : b0;
        _tile_loadd(4, row_at(at) + step_off[s], bytes);
        _tile_loadd(6, b0, kGemmNr * 4);
        _tile_loadd(7, b1, kGemmNr * 4);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        if (rows > 16) {
          _tile_loadd(5, row_at(at + 16) + step_off[s], bytes);
          _tile_dpbf16ps(2, 5, 6);
          _tile_dpbf16ps(3, 5, 7);
        }
      }
      _tile_stored(0, acc, 128);
      _tile_stored(1, acc + 16, 128);
      if (rows > 16) {
        _tile_stored(2, acc + 16 * 32, 128);
        _tile_stored(3, acc + 16 * 32 + 16, 128);
      }
      const int64_t col = p * kGemmNr, cols = min_i(min_i(p1, p + kPt) * kGemmNr, g.n) - col;
      for (int r = 0; r < rows; ++r) {
        const int64_t j = at + r;
        if (j % vw >= ow) continue;
        GemmArgs row = g;
        row.c = g.c + (j / vw * ow + j % vw) * g.ldc;
        epilogue(row, acc + r * 32, 0, 0, 1, col, cols, true, true);
      }
      i = at + rows;
    }
  amx_release();
}

void to_bf16_rows(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    to_bf16(VecF::load(x + i), VecF::load(x + i + 16)).store(reinterpret_cast<uint32_t*>(y + i));
  if (i < n) {
    alignas(64) uint16_t t[32];
    const int64_t left = n - i;
    to_bf16(VecF::load_tail(x + i, min_i(left, 16)), left > 16 ? VecF::load_tail(x + i + 16, left - 16) : VecF::zero())
        .store(reinterpret_cast<uint32_t*>(t));
    for (int64_t j = 0; j < left; ++j) y[i + j] = t[j];
  }
}

MSV0_EXPORT_CONFIG(sgemm_bf16_amx, sgemm_bf16, kMr, kPt * kGemmNr, sgemm_bf16_pack_b, sgemm_bf16_packed_size,
                   sgemm_bf16_amx_strided, to_bf16_rows)
#else
constexpr ::msv0::sgemm_bf16_t sgemm_bf16_config{sgemm_bf16, kMr, kPt * kGemmNr, sgemm_bf16_pack_b,
                                                 sgemm_bf16_packed_size};
[[maybe_unused]] static const bool sgemm_bf16_exported =
    cpu_has_avx512bf16() && ::msv0::sgemm_bf16_fill(MSV0_ISA_INDEX, sgemm_bf16_config);
#endif
}  // namespace MSV0_ISA
}  // namespace msv0
MSV0_TARGET_POP
#endif  // __AVX512F__

#else  // binding pass
namespace msv0 {

// The AMX slot asks the OS for the tile state here, on first use, and yields to the plain one
// where the OS refuses.
const SgemmConfig& bf16_gemm() { return amx_or_plain(sgemm_bf16_amx_slots(), Amx::kBf16, sgemm_bf16_slots()); }

bool bf16_gemm_on_amx() { return &bf16_gemm() == &sgemm_bf16_amx_slots().get(); }

MSV0_BIND(m) {
  m.def("bf16_available", [] { return bf16_gemm().fn != nullptr; },
        "Whether the bf16 GEMM that precision=\"bf16\" needs runs here: AVX512-BF16, from the avx512 tier up.");
  m.def("bf16_tile", [] { const SgemmConfig& c = bf16_gemm(); return py::make_tuple(c.mr, c.nr); },
        "(mr, nr) of the bf16 GEMM on the active tier: (12, 32) vdpbf16ps, (32, 32) AMX; (0, 0) none.");
}

}  // namespace msv0
#endif
