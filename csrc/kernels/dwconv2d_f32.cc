// Depthwise 2-D convolution, NHWC float32, vectorised along C (contiguous in NHWC):
//   y[b,oy,ox,c] = clamp(bias[c] + sum_{ky,kx} x[b, oy*sh-pt+ky*dh, ox*sw-pl+kx*dw, c] * w[ky,kx,c])
// Taps outside the image contribute nothing. Weights are packed once per Session as
// [kh*kw][cp], cp = C rounded up to the lane count and zero-padded, so every weight/bias load is a whole
// vector; x and y use masked tails and are never over-read or over-written.
#include "kernels/dwconv2d_f32.h"

#include "kernels/kernel.h"

namespace msv0 {
MSV0_DECLARE(dwconv2d_f32, DwConvConfig)
}  // namespace msv0

#if !MSV0_ONCE
namespace msv0 {
namespace MSV0_ISA {
namespace {

// Taps [first, last) of a window starting at `start` with step d that land inside [0, size).
int64_t first_tap(int64_t start, int64_t d) { return start >= 0 ? 0 : (-start + d - 1) / d; }
int64_t last_tap(int64_t start, int64_t d, int64_t size, int64_t k) {
  return start >= size ? 0 : min_i(k, (size - 1 - start) / d + 1);
}

// Fast path: K x K window, stride S, no dilation. Rows outside the image point at a zero row,
// so every row of the window is read unconditionally and the loops unroll completely; only
// the few border columns test their taps. The K*K weight vectors of one channel block stay
// in registers across whole output rows, R rows at a time.
template <int K>
struct Taps {
  VecF w[K * K];
  VecF bias, lo, hi;
};

// Input rows R output rows' windows span.
template <int K, int S, int R>
constexpr int rows_spanned() {
  return (R - 1) * S + K;
}

// R x P interior outputs from column ox, all taps inside the image. Each input vector is
// loaded once and feeds every window it lies in (at stride 1 up to K columns x K rows of
// them), so R rows per step cut the reads of the input, which comes from L2 (a row of one
// channel block at a time does not stay in L1 for the next output row). The R * P
// accumulators are independent FMA chains, enough to keep both FMA pipes busy despite the
// FMA latency. Each output still adds its taps in (ky, kx) order.
template <int K, int S, int R, int P, bool Tail>
void interior(const DwArgs& a, const Taps<K>& t, const float* const* rows, float* const* yrows, int64_t c,
              int64_t lanes, int64_t ox) {
  constexpr int I = rows_spanned<K, S, R>();
  constexpr int J = (P - 1) * S + K;  // input columns the P windows span
  const int64_t ch = a.c;
  VecF acc[R][P];
#pragma GCC unroll 4
  for (int q = 0; q < R; ++q)
#pragma GCC unroll 16
    for (int p = 0; p < P; ++p) acc[q][p] = t.bias;
  const int64_t off = (ox * S - a.pl) * ch + c;
#pragma GCC unroll 8
  for (int i = 0; i < I; ++i) {
    const float* r = rows[i] + off;
#pragma GCC unroll 32
    for (int j = 0; j < J; ++j) {
      const VecF xv = load_n<Tail>(r + j * ch, lanes);
#pragma GCC unroll 4
      for (int q = 0; q < R; ++q) {
        const int ky = i - q * S;  // output row q holds input row i as its tap row ky
        if (ky < 0 || ky >= K) continue;
#pragma GCC unroll 8
        for (int kx = 0; kx < K; ++kx) {
          const int d = j - kx;  // window p = d / S holds column j as its tap kx
          if (d >= 0 && d % S == 0 && d / S < P) acc[q][d / S] = fmadd(xv, t.w[ky * K + kx], acc[q][d / S]);
        }
      }
    }
  }
#pragma GCC unroll 4
  for (int q = 0; q < R; ++q)
#pragma GCC unroll 16
    for (int p = 0; p < P; ++p)
      store_n<Tail>(clamp(acc[q][p], t.lo, t.hi), yrows[q] + (ox + p) * ch + c, lanes);
}

// Outputs per interior step: as many accumulators as the register file holds beside the K*K
// weights (16 registers on AVX2, 32 on AVX-512 and NEON).
template <int K>
constexpr int outputs_per_step() {
  return K == 1 ? 8 : K == 3 ? (VecF::kLanes == 8 ? 4 : 8) : 3;
}

// Output rows yrows[0, R) of one channel block; rows are their windows' input rows.
template <int K, int S, int R, bool Tail>
void row_block(const DwArgs& a, const float* const* rows, float* const* yrows, int64_t c, int64_t lanes,
               int64_t ox_lo, int64_t ox_hi) {
  constexpr int P = outputs_per_step<K>() / R;
  const int64_t ch = a.c;
  Taps<K> t;
  for (int i = 0; i < K * K; ++i) t.w[i] = VecF::load(a.weight + i * a.cp + c);
  t.bias = VecF::load(a.bias + c);
  t.lo = VecF::splat(a.lo);
  t.hi = VecF::splat(a.hi);

  auto border = [&](int64_t ox) {
    const int64_t ix0 = ox * S - a.pl;
    for (int q = 0; q < R; ++q) {
      VecF acc = t.bias;
      for (int ky = 0; ky < K; ++ky)
        for (int kx = 0; kx < K; ++kx) {
          const int64_t ix = ix0 + kx;
          if (ix >= 0 && ix < a.w)
            acc = fmadd(load_n<Tail>(rows[q * S + ky] + ix * ch + c, lanes), t.w[ky * K + kx], acc);
        }
      store_n<Tail>(clamp(acc, t.lo, t.hi), yrows[q] + ox * ch + c, lanes);
    }
  };

  int64_t ox = 0;
  for (; ox < ox_lo; ++ox) border(ox);
  for (; ox + P <= ox_hi; ox += P) interior<K, S, R, P, Tail>(a, t, rows, yrows, c, lanes, ox);
  if constexpr (P > 2) {  // the rest of the interior in half steps, then column by column
    if (ox + P / 2 <= ox_hi) {
      interior<K, S, R, P / 2, Tail>(a, t, rows, yrows, c, lanes, ox);
      ox += P / 2;
    }
  }
  for (; ox < ox_hi; ++ox) interior<K, S, R, 1, Tail>(a, t, rows, yrows, c, lanes, ox);
  for (; ox < a.ow; ++ox) border(ox);
}

// Output rows [r, r + R) of image b (oy = r's row in it), every channel block.
template <int K, int S, int R>
void rows_step(const DwArgs& a, int64_t r, int64_t b, int64_t oy, int64_t ox_lo, int64_t ox_hi) {
  constexpr int I = rows_spanned<K, S, R>();
  const float* rows[I];
  for (int i = 0; i < I; ++i) {
    const int64_t iy = oy * S - a.pt + i;
    rows[i] = iy >= 0 && iy < a.h ? a.x + (b * a.h + iy) * a.w * a.c : a.zeros;
  }
  float* yrows[R];
  for (int q = 0; q < R; ++q) yrows[q] = a.y + (r + q) * a.ow * a.c;
  int64_t c = 0;
  for (; c + VecF::kLanes <= a.c; c += VecF::kLanes)
    row_block<K, S, R, false>(a, rows, yrows, c, VecF::kLanes, ox_lo, ox_hi);
  if (c < a.c) row_block<K, S, R, true>(a, rows, yrows, c, a.c - c, ox_lo, ox_hi);
}

template <int K, int S>
void rows_fast(const DwArgs& a, int64_t r0, int64_t r1) {
  // Columns whose whole window lies inside the image: ox*S - pl >= 0 and ox*S - pl + K - 1 < w.
  int64_t ox_lo = min_i((a.pl + S - 1) / S, a.ow);
  int64_t ox_hi = a.w - K + a.pl >= 0 ? (a.w - K + a.pl) / S + 1 : 0;
  ox_hi = max_i(ox_lo, min_i(ox_hi, a.ow));
  // 3x3: two output rows per step where both are in the same image (the 5x5 weights leave
  // no registers for a second row's accumulators).
  constexpr int R = K == 3 ? 2 : 1;
  for (int64_t r = r0; r < r1;) {
    const int64_t b = r / a.oh, oy = r % a.oh;
    if (R > 1 && r + R <= r1 && oy + R <= a.oh) {
      rows_step<K, S, R>(a, r, b, oy, ox_lo, ox_hi);
      r += R;
    } else {
      rows_step<K, S, 1>(a, r, b, oy, ox_lo, ox_hi);
      r += 1;
    }
  }
}

// Any window, stride and dilation: taps clipped to the image per pixel.
template <bool Tail>
void pixel_general(const DwArgs& a, int64_t b, int64_t iy0, int64_t ky0, int64_t ky1, int64_t ix0,
                   int64_t kx0, int64_t kx1, float* out, int64_t c, int64_t lanes) {
  VecF acc = VecF::load(a.bias + c);
  for (int64_t ky = ky0; ky < ky1; ++ky) {
    const float* xr = a.x + ((b * a.h + iy0 + ky * a.dh) * a.w + ix0) * a.c + c;
    const float* wr = a.weight + ky * a.kw * a.cp + c;
    for (int64_t kx = kx0; kx < kx1; ++kx)
      acc = fmadd(load_n<Tail>(xr + kx * a.dw * a.c, lanes), VecF::load(wr + kx * a.cp), acc);
  }
  store_n<Tail>(clamp(acc, VecF::splat(a.lo), VecF::splat(a.hi)), out + c, lanes);
}

void rows_general(const DwArgs& a, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t b = r / a.oh, oy = r % a.oh;
    const int64_t iy0 = oy * a.sh - a.pt;
    const int64_t ky0 = first_tap(iy0, a.dh), ky1 = last_tap(iy0, a.dh, a.h, a.kh);
    for (int64_t ox = 0; ox < a.ow; ++ox) {
      const int64_t ix0 = ox * a.sw - a.pl;
      const int64_t kx0 = first_tap(ix0, a.dw), kx1 = last_tap(ix0, a.dw, a.w, a.kw);
      float* out = a.y + (r * a.ow + ox) * a.c;
      int64_t c = 0;
      for (; c + VecF::kLanes <= a.c; c += VecF::kLanes)
        pixel_general<false>(a, b, iy0, ky0, ky1, ix0, kx0, kx1, out, c, VecF::kLanes);
      if (c < a.c) pixel_general<true>(a, b, iy0, ky0, ky1, ix0, kx0, kx1, out, c, a.c - c);
    }
  }
}

// Few channels (the lane count a multiple of c), horizontal stride 1, undilated along W: the
// ow*c floats of an output row are vectorised as one run, lanes/c pixels per vector, since tap
// (ky, kx) reads that run shifted by kx - pl pixels in input row ky, and its weight tiled to a
// vector is the same for every vector of the run. Per channel a vector of c lanes would leave
// most lanes idle (hand-tracking models run 8-channel layers at 128x128). Pixels whose taps
// leave the image go per pixel; every output adds its taps in (ky, kx) order, as elsewhere.
constexpr int64_t kNarrowMaxTaps = 49;

bool narrow_fits(const DwArgs& a) {
  return a.c < VecF::kLanes && VecF::kLanes % a.c == 0 && a.sw == 1 && a.dw == 1 && a.kh * a.kw <= kNarrowMaxTaps;
}

void rows_narrow(const DwArgs& a, int64_t r0, int64_t r1) {
  constexpr int64_t L = VecF::kLanes;
  constexpr int kP = 4;  // vectors per step: independent FMA chains
  const int64_t c = a.c, taps = a.kh * a.kw;
  VecF w[kNarrowMaxTaps];
  alignas(64) float tiled[L];
  for (int64_t t = 0; t < taps; ++t) {
    for (int64_t l = 0; l < L; ++l) tiled[l] = a.weight[t * a.cp + l % c];
    w[t] = VecF::load(tiled);
  }
  for (int64_t l = 0; l < L; ++l) tiled[l] = a.bias[l % c];
  const VecF bias = VecF::load(tiled), lo = VecF::splat(a.lo), hi = VecF::splat(a.hi);
  // Pixels [ox_lo, ox_end) have their whole window row inside the image and fill whole vectors.
  const int64_t ox_lo = min_i(a.pl, a.ow), ox_hi = max_i(ox_lo, min_i(a.w - a.kw + a.pl + 1, a.ow));
  const int64_t f_lo = ox_lo * c, f_end = f_lo + (ox_hi - ox_lo) * c / L * L, ox_end = f_end / c;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t b = r / a.oh, oy = r % a.oh, iy0 = oy * a.sh - a.pt;
    const int64_t ky0 = first_tap(iy0, a.dh), ky1 = last_tap(iy0, a.dh, a.h, a.kh);
    float* y = a.y + r * a.ow * c;
    auto border = [&](int64_t ox) {
      const int64_t ix0 = ox - a.pl;
      pixel_general<true>(a, b, iy0, ky0, ky1, ix0, first_tap(ix0, 1), last_tap(ix0, 1, a.w, a.kw), y + ox * c, 0,
                          c);
    };
    for (int64_t ox = 0; ox < ox_lo; ++ox) border(ox);
    for (int64_t ox = ox_end; ox < a.ow; ++ox) border(ox);
    // Input row ky's floats from pixel -pl on; f >= f_lo = pl * c keeps every read inside the row.
    auto row = [&](int64_t ky) { return a.x + (b * a.h + iy0 + ky * a.dh) * a.w * c - a.pl * c; };
    int64_t f = f_lo;
    for (; f + kP * L <= f_end; f += kP * L) {
      VecF acc[kP];
      for (int v = 0; v < kP; ++v) acc[v] = bias;
      for (int64_t ky = ky0; ky < ky1; ++ky) {
        const float* xr = row(ky) + f;
        for (int64_t kx = 0; kx < a.kw; ++kx)
          for (int v = 0; v < kP; ++v) acc[v] = fmadd(VecF::load(xr + kx * c + v * L), w[ky * a.kw + kx], acc[v]);
      }
      for (int v = 0; v < kP; ++v) clamp(acc[v], lo, hi).store(y + f + v * L);
    }
    for (; f < f_end; f += L) {
      VecF acc = bias;
      for (int64_t ky = ky0; ky < ky1; ++ky) {
        const float* xr = row(ky) + f;
        for (int64_t kx = 0; kx < a.kw; ++kx) acc = fmadd(VecF::load(xr + kx * c), w[ky * a.kw + kx], acc);
      }
      clamp(acc, lo, hi).store(y + f);
    }
  }
}

}  // namespace

void dwconv2d_f32(const DwArgs& a, int64_t r0, int64_t r1) {
  if (narrow_fits(a)) return rows_narrow(a, r0, r1);
  const bool square = a.kh == a.kw && a.sh == a.sw && a.dh == 1 && a.dw == 1;
  // 1x1: a per-channel multiply-add (hand-tracking models scale 8- and 16-channel maps so).
  if (square && a.kh == 1 && a.sh == 1) return rows_fast<1, 1>(a, r0, r1);
  if (square && a.kh == 1 && a.sh == 2) return rows_fast<1, 2>(a, r0, r1);
  if (square && a.kh == 3 && a.sh == 1) return rows_fast<3, 1>(a, r0, r1);
  if (square && a.kh == 3 && a.sh == 2) return rows_fast<3, 2>(a, r0, r1);
  if (square && a.kh == 5 && a.sh == 1) return rows_fast<5, 1>(a, r0, r1);
  if (square && a.kh == 5 && a.sh == 2) return rows_fast<5, 2>(a, r0, r1);
  rows_general(a, r0, r1);
}

MSV0_EXPORT_CONFIG(dwconv2d_f32, dwconv2d_f32, VecF::kLanes)
}  // namespace MSV0_ISA
}  // namespace msv0

#else  // binding pass
#include <string>
#include <vector>

#include "kernels/conv2d_f32.h"

namespace msv0 {

const DwConvConfig& dwconv_config() { return MSV0_DISPATCH(dwconv2d_f32); }

DwPacked dw_pack(const float* weight, const float* bias, int64_t c, int64_t taps) {
  const int64_t cr = dwconv_config().cr;
  DwPacked p;
  p.cp = (c + cr - 1) / cr * cr;
  p.w.assign(static_cast<size_t>(taps * p.cp), 0.f);
  p.bias.assign(static_cast<size_t>(p.cp), 0.f);
  for (int64_t ch = 0; ch < c; ++ch) {
    for (int64_t t = 0; t < taps; ++t) p.w[static_cast<size_t>(t * p.cp + ch)] = weight[ch * taps + t];
    if (bias) p.bias[static_cast<size_t>(ch)] = bias[ch];
  }
  return p;
}

namespace {

// A depthwise Conv2D (one output channel per input channel). It runs the tier it was packed
// for: a wider tier would read whole vectors past a narrower tier's padding.
class DwConv2d : public NativeOp {
 public:
  DwConv2d(const Conv2dShape& s, const float* weight, const float* bias)
      : fn_(dwconv_config().fn), zeros_(static_cast<size_t>(s.w * s.c), 0.f) {
    parts_.w = std::make_shared<const DwPacked>(dw_pack(weight, bias, s.c, s.kh * s.kw));
    parts_.args = DwArgs{nullptr, nullptr, parts_.w->w.data(), parts_.w->bias.data(), nullptr,
                         s.n, s.h, s.w, s.c, s.oh, s.ow, parts_.w->cp,
                         s.kh, s.kw, s.sh, s.sw, s.dh, s.dw, s.pt, s.pl, s.lo, s.hi};
    set_operands({{{s.n, s.h, s.w, s.c}}}, {{{s.n, s.oh, s.ow, s.c}}});
  }

  void run(const void* const* in, void* const* out) const override {
    DwArgs a = parts_.args;
    a.x = static_cast<const float*>(in[0]);
    a.y = static_cast<float*>(out[0]);
    a.zeros = zeros_.data();  // the row read for taps above or below the image
    parallel_for(a.n * a.oh, grain_for(a.ow * a.c * a.kh * a.kw), [&](int64_t r0, int64_t r1) {
      fn_(a, r0, r1);
      post_.apply(a.y, r0 * a.ow * a.c, r1 * a.ow * a.c);
    });
  }
  const char* name() const override { return "depthwise"; }
  std::shared_ptr<NativeOp> with_post(const PostOp& post) const override {
    auto c = std::make_shared<DwConv2d>(*this);
    c->post_ = post_.then(post);
    return c;
  }
  // A fused block absorbs the plain object only (it has no post-op stage).
  const DepthwiseParts* parts() const { return post_ ? nullptr : &parts_; }

 private:
  DwConvFn fn_;
  DepthwiseParts parts_;
  std::vector<float> zeros_;
  PostOp post_;
};

}  // namespace

std::shared_ptr<NativeOp> make_dwconv2d(const Conv2dShape& s, const float* weight, const float* bias) {
  return std::make_shared<DwConv2d>(s, weight, bias);
}

const DepthwiseParts* depthwise_parts(const NativeOp& op) {
  const auto* d = dynamic_cast<const DwConv2d*>(&op);
  return d ? d->parts() : nullptr;
}

}  // namespace msv0
#endif
