// Conv2D, NHWC float32 (format-v0.md §5): y = clamp(conv(x, W) + bias, lo, hi), grouped.
// Each tile of output pixels is gathered (im2col) into a per-thread buffer, one row per pixel
// in the weight's (kh, kw, c) order, and multiplied by the packed weight of its group; bias and
// the activation clamp run in the SGEMM epilogue. A 1x1 stride-1 unpadded conv skips the
// gather: the NHWC rows of x already are the GEMM's A.
#include "kernels/gemm_f32.h"

#include "kernels/kernel.h"

namespace msv0 {

struct ConvArgs {
  const float* x;         // n x h x w x c
  float* y;               // n x oh x ow x oc
  const float* w_packed;  // group blocks of packed_size(og, kh*kw*cg) floats, packed for gemm
  int64_t w_group_stride;
  SgemmFn gemm;  // the slot whose packer packed w_packed (conv2d_f32 only: Winograd is fp32)
  const float* bias;  // oc floats, or null
  int64_t n, h, w, c, oh, ow, oc, group;
  int64_t kh, kw, sh, sw, dh, dw, pt, pl;
  float lo, hi;
};

// Output pixels [p0, p1) of the flattened (n, oh, ow), and in every group the output channels of
// B panels [q0, q1) (16 channels each); buf holds (p1 - p0) * kh*kw*c/group floats (unused by
// the 1x1 path and 1-D windows that are runs of x). Reads of x are bounds-checked per tap, so any oh/ow is safe.
using Conv2dFn = void (*)(const ConvArgs&, int64_t p0, int64_t p1, int64_t q0, int64_t q1, float* buf);
MSV0_DECLARE(conv2d_f32, Conv2dFn)

// Winograd F(T x T, 3x3) for 3x3 stride-1 undilated group-1 convs, T = 4 (fp32) or 2 (fp32, bf16):
// w_packed holds (T+2)^2 packed B blocks (c x oc each, w_group_stride apart), one per point of
// the transformed tile, packed for a.gemm. Tiles [t0, t1) of the flattened (n, ceil(oh/T),
// ceil(ow/T)), output channels of B panels [q0, q1); v holds (T+2)^2*(t1-t0)*c floats and m
// (T+2)^2*(t1-t0)*oc. Taps outside x read as zero; outputs past oh/ow are not written.
using Conv2dWinoFn = void (*)(const ConvArgs&, int64_t t0, int64_t t1, int64_t q0, int64_t q1, float* v, float* m);
MSV0_DECLARE(conv2d_f32_winograd, Conv2dWinoFn)
MSV0_DECLARE(conv2d_f32_winograd_f2, Conv2dWinoFn)

}  // namespace msv0

#if !MSV0_ONCE
namespace msv0 {
namespace MSV0_ISA {
namespace {

void copy_floats(float* dst, const float* src, int64_t n) {
  int64_t i = 0;
  for (; i + VecF::kLanes <= n; i += VecF::kLanes) VecF::load(src + i).store(dst + i);
  if (i < n) VecF::load_tail(src + i, n - i).store_tail(dst + i, n - i);
}

void zero_floats(float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + VecF::kLanes <= n; i += VecF::kLanes) VecF::zero().store(dst + i);
  if (i < n) VecF::zero().store_tail(dst + i, n - i);
}

// One im2col row: the kh x kw window of output pixel (b, oy, ox), channels [c0, c0 + cg);
// taps in the padding are zeros.
void gather_row(const ConvArgs& a, int64_t b, int64_t oy, int64_t ox, int64_t c0, int64_t cg, float* dst) {
  const int64_t ix0 = ox * a.sw - a.pl;
  // With dilation 1 and all kw taps inside the image, one group's window row is one
  // contiguous run of x only when the group spans every channel.
  const bool row_run = a.dw == 1 && cg == a.c && ix0 >= 0 && ix0 + a.kw <= a.w;
  for (int64_t ky = 0; ky < a.kh; ++ky, dst += a.kw * cg) {
    const int64_t iy = oy * a.sh - a.pt + ky * a.dh;
    if (iy < 0 || iy >= a.h) {
      zero_floats(dst, a.kw * cg);
      continue;
    }
    const float* src = a.x + ((b * a.h + iy) * a.w) * a.c + c0;
    if (row_run) {
      copy_floats(dst, src + ix0 * a.c, a.kw * cg);
      continue;
    }
    for (int64_t kx = 0; kx < a.kw; ++kx) {
      const int64_t ix = ix0 + kx * a.dw;
      if (ix < 0 || ix >= a.w)
        zero_floats(dst + kx * cg, cg);
      else
        copy_floats(dst + kx * cg, src + ix * a.c, cg);
    }
  }
}

// The distance in x between the windows of consecutive output pixels when every window is one
// contiguous run of x in the weight's (kh, kw, c) order (a 1-D conv along H over whole rows, or
// along W of a one-row image, unpadded, undilated, group 1), else 0. Then x itself is the GEMM's
// A with that row stride, one image at a time, and nothing is gathered.
int64_t window_step(const ConvArgs& a) {
  if (a.group != 1 || a.pt != 0 || a.pl != 0) return 0;
  if (a.ow == 1 && a.kw == a.w && a.dw == 1 && (a.dh == 1 || a.kh == 1) && (a.oh - 1) * a.sh + a.kh <= a.h)
    return a.sh * a.w * a.c;
  if (a.oh == 1 && a.h == 1 && a.kh == 1 && a.dw == 1 && (a.ow - 1) * a.sw + a.kw <= a.w) return a.sw * a.c;
  return 0;
}

}  // namespace

void conv2d_f32(const ConvArgs& a, int64_t p0, int64_t p1, int64_t q0, int64_t q1, float* buf) {
  const int64_t cg = a.c / a.group, og = a.oc / a.group, k = a.kh * a.kw * cg;
  const bool direct = a.kh == 1 && a.kw == 1 && a.sh == 1 && a.sw == 1 && a.pt == 0 && a.pl == 0 &&
                      a.oh == a.h && a.ow == a.w;
  const int64_t plane = a.oh * a.ow;
  if (const int64_t step = direct ? 0 : window_step(a)) {
    for (int64_t p = p0; p < p1;) {  // one GEMM per image the pixels span
      const int64_t b = p / plane, end = min_i(p1, (b + 1) * plane);
      const GemmArgs ga{a.x + b * a.h * a.w * a.c + (p - b * plane) * step, step, a.w_packed, a.bias,
                        a.y + p * a.oc, a.oc, end - p, og, k, a.lo, a.hi};
      a.gemm(ga, 0, end - p, q0, q1);
      p = end;
    }
    return;
  }
  for (int64_t g = 0; g < a.group; ++g) {
    const float* src = a.x + p0 * a.c + g * cg;
    int64_t lda = a.c;
    if (!direct) {
      float* row = buf;
      for (int64_t p = p0; p < p1; ++p, row += k) {
        const int64_t b = p / plane, r = p % plane;
        gather_row(a, b, r / a.ow, r % a.ow, g * cg, cg, row);
      }
      src = buf;
      lda = k;
    }
    const GemmArgs ga{src,          lda,   a.w_packed + g * a.w_group_stride, a.bias ? a.bias + g * og : nullptr,
                      a.y + p0 * a.oc + g * og, a.oc, p1 - p0, og, k, a.lo, a.hi};
    a.gemm(ga, 0, p1 - p0, q0, q1);
  }
}

MSV0_EXPORT(conv2d_f32)

namespace {

// F(4,3): B^T d for one 6-point column, A^T m for one 6-point column.
struct WinoF4 {
  static constexpr int kT = 4, kA = 6;
  static void input_1d(const VecF* d, int64_t step, VecF* r, int64_t rstep) {
    const VecF d0 = d[0], d1 = d[step], d2 = d[2 * step], d3 = d[3 * step], d4 = d[4 * step], d5 = d[5 * step];
    const VecF four = VecF::splat(4.f), five = VecF::splat(5.f), two = VecF::splat(2.f);
    r[0] = fmadd(four, d0, d4) - five * d2;
    r[rstep] = (d3 + d4) - four * (d1 + d2);
    r[2 * rstep] = fmadd(four, d1 - d2, d4 - d3);
    r[3 * rstep] = fmadd(two, d3 - d1, d4 - d2);
    r[4 * rstep] = fmadd(two, d1 - d3, d4 - d2);
    r[5 * rstep] = fmadd(four, d1, d5) - five * d3;
  }
  static void output_1d(const VecF* m, int64_t step, VecF* r, int64_t rstep) {
    const VecF m0 = m[0], m1 = m[step], m2 = m[2 * step], m3 = m[3 * step], m4 = m[4 * step], m5 = m[5 * step];
    const VecF sa = m1 + m2, sb = m3 + m4, da = m1 - m2, db = m3 - m4;
    r[0] = m0 + sa + sb;
    r[rstep] = fmadd(VecF::splat(2.f), db, da);
    r[2 * rstep] = fmadd(VecF::splat(4.f), sb, sa);
    r[3 * rstep] = fmadd(VecF::splat(8.f), db, da) + m5;
  }
};

// F(2,3): its transforms only add and subtract (F(4,3)'s scale by up to 8, amplifying a bf16
// GEMM's rounding; see conv2d_algorithm).
struct WinoF2 {
  static constexpr int kT = 2, kA = 4;
  static void input_1d(const VecF* d, int64_t step, VecF* r, int64_t rstep) {
    const VecF d0 = d[0], d1 = d[step], d2 = d[2 * step], d3 = d[3 * step];
    r[0] = d0 - d2;
    r[rstep] = d1 + d2;
    r[2 * rstep] = d2 - d1;
    r[3 * rstep] = d1 - d3;
  }
  static void output_1d(const VecF* m, int64_t step, VecF* r, int64_t rstep) {
    const VecF m1 = m[step], m2 = m[2 * step];
    r[0] = m[0] + m1 + m2;
    r[rstep] = m1 - m2 - m[3 * step];
  }
};

template <class W>
void winograd(const ConvArgs& a, int64_t t0, int64_t t1, int64_t q0, int64_t q1, float* v, float* m) {
  constexpr int T = W::kT, A = W::kA, P = A * A;
  const int64_t rows = t1 - t0, th = (a.oh + T - 1) / T, tw = (a.ow + T - 1) / T;
  VecF d[P], t[P];
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t tile = t0 + r, b = tile / (th * tw), ty = tile / tw % th, tx = tile % tw;
    const int64_t iy0 = ty * T - a.pt, ix0 = tx * T - a.pl;
    for (int64_t c = 0; c < a.c; c += VecF::kLanes) {
      const int64_t lanes = min_i(VecF::kLanes, a.c - c);
      for (int64_t i = 0; i < A; ++i) {
        const int64_t iy = iy0 + i;
        for (int64_t j = 0; j < A; ++j) {
          const int64_t ix = ix0 + j;
          d[i * A + j] = iy < 0 || iy >= a.h || ix < 0 || ix >= a.w
                             ? VecF::zero()
                             : VecF::load_tail(a.x + ((b * a.h + iy) * a.w + ix) * a.c + c, lanes);
        }
      }
      for (int j = 0; j < A; ++j) W::input_1d(d + j, A, t + j, A);  // columns
      for (int i = 0; i < A; ++i) W::input_1d(t + i * A, 1, d + i * A, 1);  // rows
      for (int xi = 0; xi < P; ++xi) d[xi].store_tail(v + (xi * rows + r) * a.c + c, lanes);
    }
  }
  for (int xi = 0; xi < P; ++xi) {
    const GemmArgs ga{v + xi * rows * a.c, a.c, a.w_packed + xi * a.w_group_stride, nullptr, m + xi * rows * a.oc,
                      a.oc, rows, a.oc, a.c, -INFINITY, INFINITY};
    a.gemm(ga, 0, rows, q0, q1);
  }
  const VecF lo = VecF::splat(a.lo), hi = VecF::splat(a.hi);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t tile = t0 + r, b = tile / (th * tw), ty = tile / tw % th, tx = tile % tw;
    const int64_t oy0 = ty * T, ox0 = tx * T;
    const int64_t ny = min_i(T, a.oh - oy0), nx = min_i(T, a.ow - ox0);
    for (int64_t o = q0 * kGemmNr, oe = min_i(q1 * kGemmNr, a.oc); o < oe; o += VecF::kLanes) {
      const int64_t lanes = min_i(VecF::kLanes, oe - o);
      for (int xi = 0; xi < P; ++xi) d[xi] = VecF::load_tail(m + (xi * rows + r) * a.oc + o, lanes);
      for (int j = 0; j < A; ++j) W::output_1d(d + j, A, t + j, A);  // columns: T x A
      for (int i = 0; i < T; ++i) W::output_1d(t + i * A, 1, d + i * T, 1);  // rows: T x T
      const VecF bias = a.bias ? VecF::load_tail(a.bias + o, lanes) : VecF::zero();
      for (int64_t i = 0; i < ny; ++i)
        for (int64_t j = 0; j < nx; ++j)
          clamp(d[i * T + j] + bias, lo, hi).store_tail(a.y + ((b * a.oh + oy0 + i) * a.ow + ox0 + j) * a.oc + o, lanes);
    }
  }
}

}  // namespace

void conv2d_f32_winograd(const ConvArgs& a, int64_t t0, int64_t t1, int64_t q0, int64_t q1, float* v, float* m) {
  winograd<WinoF4>(a, t0, t1, q0, q1, v, m);
}
void conv2d_f32_winograd_f2(const ConvArgs& a, int64_t t0, int64_t t1, int64_t q0, int64_t q1, float* v, float* m) {
  winograd<WinoF2>(a, t0, t1, q0, q1, v, m);
}

MSV0_EXPORT(conv2d_f32_winograd)
MSV0_EXPORT(conv2d_f32_winograd_f2)
}  // namespace MSV0_ISA
}  // namespace msv0

#else  // binding pass
#include <algorithm>
#include <optional>
#include <string>
#include <vector>
#include <pybind11/stl.h>

#include "kernels/binary_f32.h"
#include "kernels/binary_loop.h"
#include "kernels/conv2d_f32.h"

namespace msv0 {
namespace {

// Up to this many input channels (network stems: RGB), a group-1 conv sums straight from x:
// with K = kh*kw*c this small, the im2col copy and the GEMM's panel overhead outweigh the sums.
// A long kernel (an STFT's 1x512 over one channel) reloads its taps per pixel block there and
// is 5x faster as a GEMM. Under bf16 a stem of K >= 64 takes the GEMM too, for its 2x faster
// products; a shorter one gathers more than it gains (Zen 4, vdpbf16ps, direct / bf16 GEMM):
// ResNet-50's 7x7 3->64 (K 147) 2.26 / 1.66 ms, a 5x5 3->64 (K 75) 1.14 / 0.89, MobileNetV2's
// 3x3/2 3->32 (K 27) 0.24 / 0.33, a 7x7 1->32 (K 49) 0.42 / 0.59.
constexpr int64_t kDirectMaxChannels = 4, kDirectMaxK = 256, kBf16GemmMinK = 64;
// Winograd needs enough channels for its transforms to vectorise and enough output tiles for
// each transformed weight block (c x oc) to be reused across several GEMM rows: F(4,3)'s weights
// are 4x those of im2col and F(2,3)'s 1.8x, streamed from memory once per run. ResNet-50's 14x14
// stage (16 4x4 tiles) runs 1.5x faster on F(4,3); its 7x7 stage (4 tiles, 36 MiB of
// transformed weights) loses there, and takes F(2,3) (16 2x2 tiles).
constexpr int64_t kWinoMinChannels = 16, kWinoMinTiles = 16;

// The output tile of a Winograd algorithm: F(4x4, 3x3) or F(2x2, 3x3).
int64_t wino_tile(Conv2dAlgorithm a) { return a == Conv2dAlgorithm::kWinograd ? 4 : 2; }

int64_t wino_tiles(const Conv2dShape& s, int64_t tile) {
  return s.n * ((s.oh + tile - 1) / tile) * ((s.ow + tile - 1) / tile);
}

}  // namespace

Conv2dAlgorithm conv2d_algorithm(const Conv2dShape& s, Precision precision) {
  // One channel per group: the depthwise kernel computes the same sums.
  if (s.group == s.c && s.c == s.oc) return Conv2dAlgorithm::kDepthwise;
  // A 1x1 unpadded stride-1 conv is a GEMM on x's rows as they are (no im2col copy to save),
  // and only a GEMM object can be absorbed by a fused block, so it wins even for stems.
  if (s.group == 1 && s.kh == 1 && s.kw == 1 && s.sh == 1 && s.sw == 1 && s.pt == 0 && s.pl == 0 &&
      s.oh == s.h && s.ow == s.w)
    return Conv2dAlgorithm::kGemm1x1;
  const int64_t k = s.kh * s.kw * s.c;
  if (s.group == 1 && s.c <= kDirectMaxChannels && k <= kDirectMaxK &&
      (precision != Precision::kBf16 || k < kBf16GemmMinK))
    return Conv2dAlgorithm::kDirect;
  if (!(s.kh == 3 && s.kw == 3 && s.sh == 1 && s.sw == 1 && s.dh == 1 && s.dw == 1 && s.group == 1 &&
        s.c >= kWinoMinChannels && s.oc >= kWinoMinChannels))
    return Conv2dAlgorithm::kIm2col;
  // Under bf16, F(4,3) stays fp32: in bf16 its transforms' factors (up to 5 and 8) amplified the
  // rounding until PP-OCRv4's detector drifted from fp32 by 0.23 rather than 0.07. F(2,3) only adds
  // and subtracts, and on vdpbf16ps (2.25x fewer products at twice fp32's rate, half the weight
  // bytes) it is the faster; where AMX runs the bf16 GEMM, im2col on it is (bf16 ResNet-50 20.7 ms
  // so, 25.6 on fp32 Winograd). fp16's GEMM is no more than twice as fast as fp32: F(4,3) in fp32
  // (4x fewer products) stays for it.
  const int64_t tiles2 = wino_tiles(s, 2);
  if (precision == Precision::kBf16) {
    if (bf16_gemm_on_amx() || tiles2 < kWinoMinTiles) return Conv2dAlgorithm::kIm2col;
    return Conv2dAlgorithm::kWinogradF2;
  }
  if (wino_tiles(s, 4) >= kWinoMinTiles) return Conv2dAlgorithm::kWinograd;
  // Too few 4x4 tiles: in fp32, F(2,3) streams 1.8x im2col's weights for 1.7x fewer products on
  // ResNet-50's 7x7 stage (16 tiles of 2x2), 1.75 ms a layer against 2.25 (Zen 4, 1 thread).
  // fp16 keeps im2col there: nothing measured its F(2,3) on an ARM board's memory.
  return precision == Precision::kFp32 && tiles2 >= kWinoMinTiles ? Conv2dAlgorithm::kWinogradF2
                                                                   : Conv2dAlgorithm::kIm2col;
}

const char* conv2d_algorithm_name(Conv2dAlgorithm a) {
  switch (a) {
    case Conv2dAlgorithm::kDepthwise: return "depthwise";
    case Conv2dAlgorithm::kDirect: return "direct";
    case Conv2dAlgorithm::kGemm1x1: return "gemm1x1";
    case Conv2dAlgorithm::kIm2col: return "im2col";
    case Conv2dAlgorithm::kWinograd: return "winograd";
    case Conv2dAlgorithm::kWinogradF2: return "winograd_f2";
  }
  return "?";
}

namespace {

// Where part `part` of `splits` equal shares of `panels` B panels starts: on a micro-kernel
// tile boundary (`tile` panels) when the tiles divide evenly, else on any panel, as a lone
// panel costs less than one thread doing a whole extra tile (ten panels in tiles of two:
// 5 + 5, not 4 + 6).
int64_t panel_bound(int64_t panels, int64_t part, int64_t splits, int64_t tile) {
  const int64_t tiles = (panels + tile - 1) / tile;
  return tiles % splits == 0 ? std::min(panels, tile * (tiles * part / splits)) : panels * part / splits;
}

// A Conv2D through the packed SGEMM: im2col (the 1x1 stride-1 unpadded case reads x's rows
// directly), or Winograd F(T x T, 3x3). The weight [oc, kh, kw, c/group] ("KHWC") is packed
// once: group g's rows form B^T (og x kh*kw*cg) of its GEMM; Winograd packs the (T+2)^2
// transformed c x oc blocks instead. With bf16 or fp16, im2col, 1x1 and F(2,3) run on that
// GEMM; F(4,3) stays fp32 (see conv2d_algorithm).
class Conv2dGemm : public NativeOp {
 public:
  Conv2dGemm(const Conv2dShape& s, Conv2dAlgorithm algo, const float* weight, const float* bias, Precision precision)
      : s_(s), algo_(algo),
        gemm_(&gemm_config(algo == Conv2dAlgorithm::kWinograd ? Precision::kFp32 : precision)),
        fn_(MSV0_DISPATCH(conv2d_f32)),
        wino_fn_(algo == Conv2dAlgorithm::kWinogradF2 ? MSV0_DISPATCH(conv2d_f32_winograd_f2)
                                                      : MSV0_DISPATCH(conv2d_f32_winograd)) {
    const int64_t og = s.oc / s.group, k = s.kh * s.kw * (s.c / s.group);
    if (winograd()) {
      pack_winograd(weight, bias);
    } else {
      auto b = std::make_shared<PackedB>();
      b->gemm = gemm_;
      b->n = og;
      b->k = k;
      group_stride_ = gemm_->packed_size(og, k);
      b->w.resize(static_cast<size_t>(group_stride_ * s.group));
      for (int64_t g = 0; g < s.group; ++g) gemm_->pack(weight + g * og * k, k, true, og, k, b->w.data() + g * group_stride_);
      if (bias) b->bias.assign(bias, bias + s.oc);
      parts_ = PointwiseParts{std::move(b), s.lo, s.hi};
      plan_in_place();
    }
    set_operands({{{s.n, s.h, s.w, s.c}}}, {{{s.n, s.oh, s.ow, s.oc}}});
  }

  void run(const void* const* in, void* const* out) const override {
    const PackedB& b = *parts_.b;
    const ConvArgs a{static_cast<const float*>(in[0]), static_cast<float*>(out[0]), b.w.data(), group_stride_,
                     gemm_->fn, b.bias_or_null(), s_.n, s_.h, s_.w, s_.c, s_.oh, s_.ow, s_.oc, s_.group,
                     s_.kh, s_.kw, s_.sh, s_.sw, s_.dh, s_.dw, s_.pt, s_.pl, s_.lo, s_.hi};
    const float* r = inputs().size() > 1 ? static_cast<const float*>(in[1]) : nullptr;  // with_residual's
    if (winograd()) return run_winograd(a, r);
    if (!step_off_.empty()) return run_in_place(a, r);
    run_gemm(a, r);
  }
  const char* name() const override { return step_off_.empty() ? conv2d_algorithm_name(algo_) : "im2col_in_place"; }
  std::shared_ptr<NativeOp> with_post(const PostOp& post) const override {
    auto c = std::make_shared<Conv2dGemm>(*this);
    c->post_ = post_.then(post);
    return c;
  }
  // A copy that also runs the Binary `binary` on each block of output it writes, y = y op r
  // (then clamped as the Binary clamps), as its first post-op stage: r is the Binary's other
  // operand, of the output's shape, read as this object's second input. Null once a post-op
  // is set (it would run first).
  std::shared_ptr<NativeOp> with_residual(const BinaryArgs& binary) const {
    if (post_) return nullptr;
    auto c = std::make_shared<Conv2dGemm>(*this);
    PostOp::Stage st;
    st.binary = binary_f32_slots().get();
    st.b = binary;
    c->post_ = PostOp{{std::move(st)}};
    c->set_operands({inputs()[0], outputs()[0]}, outputs());
    return c;
  }
  // A fused block absorbs the plain 1x1 object only (it has no stages after the GEMM).
  const PointwiseParts* pointwise() const {
    return algo_ == Conv2dAlgorithm::kGemm1x1 && !post_ ? &parts_ : nullptr;
  }

 private:
  bool winograd() const { return algo_ == Conv2dAlgorithm::kWinograd || algo_ == Conv2dAlgorithm::kWinogradF2; }

  // Transformed weight floats above which threads split output channels rather than tiles
  // (each then repeats the input transform, which small layers cannot afford).
  static constexpr int64_t kWinoBigWeights = 1 << 20;

  // The post-op on channels [c0, c1) of pixels [p0, p1), while they are in cache (r: the
  // residual Binary's other operand).
  void finish_pixels(float* y, const float* r, int64_t p0, int64_t p1, int64_t c0, int64_t c1) const {
    post_.apply_pixels(y, s_.oc, p0, p1, c0, c1, r);
  }
  bool finishes() const { return static_cast<bool>(post_); }

  void run_gemm(const ConvArgs& a, const float* r) const {
    const int64_t pixels = a.n * a.oh * a.ow, k = a.kh * a.kw * (a.c / a.group);
    const int64_t panels = (a.oc / a.group + kGemmNr - 1) / kGemmNr, tile = gemm_->nr / kGemmNr;
    const int64_t threads = bound_threads();
    // Each tile of pixels streams all of B once (the SGEMM packs A per k block, so a large
    // gathered tile costs nothing in L1), so tiles are as large as ~240 rows allow. When there
    // are too few pixels to give every thread a tile of >= 48 rows, the threads split the output
    // channels instead, in whole micro-kernel tiles of panels, and each streams only its share
    // of B: ResNet-50's 7x7 stage has 49 pixels and 9 MiB of weights.
    // A whole number of tiles per thread: 3 tiles on 2 threads would leave one idle a third of the time.
    const int64_t pixel_tiles = pixels >= 48 * threads ? ((pixels + 239) / 240 + threads - 1) / threads * threads
                                                       : (pixels + 239) / 240;
    const int64_t rows = (pixels + pixel_tiles - 1) / pixel_tiles;  // equal tiles balance two threads
    const int64_t tiles = (pixels + rows - 1) / rows;
    const int64_t splits = tiles >= threads ? 1 : std::min<int64_t>((panels + tile - 1) / tile, threads);
    parallel_for(tiles * splits, 1, [&](int64_t t0, int64_t t1) {
      float* buf = thread_scratch(static_cast<size_t>(rows * k));
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t pt = t / splits, part = t % splits;
        const int64_t q0 = panel_bound(panels, part, splits, tile), q1 = panel_bound(panels, part + 1, splits, tile);
        const int64_t p0 = pt * rows, p1 = std::min(pixels, pt * rows + rows);
        fn_(a, p0, p1, q0, q1, buf);
        if (!finishes()) continue;
        const int64_t og = a.oc / a.group, c0 = q0 * kGemmNr, c1 = std::min(q1 * kGemmNr, og);
        if (c0 == 0 && c1 == og)
          finish_pixels(a.y, r, p0, p1, 0, a.oc);
        else
          for (int64_t g = 0; g < a.group; ++g) finish_pixels(a.y, r, p0, p1, g * og + c0, g * og + c1);
      }
    });
  }

  // The in-place plan, where the GEMM slot reads bf16 rows of A in place (bf16 on AMX): x is
  // rounded to bf16 once per run into a zero-padded copy (Hp x Wp pixels), and each output
  // pixel's window is read there, in 32-value steps of k (step_off_, from the window's first
  // value) that each lie in one run of the copy (a window row of kw·c values, or one tap's c),
  // rather than gathered as float32 and rounded once per tap (ResNet-50's 3x3 convs). Pixels
  // along a row are sw·c values apart; with stride 1 a row's windows continue into the next
  // row's Wp − ow windows later, so a run of output rows is one range of "virtual" pixels,
  // those past ow left unstored. Otherwise each output row is a line of ow rounded up to 16
  // pixels (whole AMX tiles), those past ow unstored (their windows may reach past the copy:
  // it has slack), where they are at most a quarter of the line: ResNet-50's 3x3/2 to 7x7
  // (7 pixels a line of 16) took 465 us so, 351 gathered.
  void plan_in_place() {
    if (!gemm_->strided || algo_ != Conv2dAlgorithm::kIm2col || s_.group != 1) return;
    const int64_t run = s_.dw == 1 ? s_.kw * s_.c : s_.c, k = s_.kh * s_.kw * s_.c;
    virtual_rows_ = s_.sh == 1 && s_.sw == 1;
    if (run % 32 || k % 32 || (!virtual_rows_ && ((s_.ow + 15) / 16 * 16 - s_.ow) * 4 > (s_.ow + 15) / 16 * 16)) return;
    hp_ = std::max(s_.h + s_.pt, (s_.oh - 1) * s_.sh + (s_.kh - 1) * s_.dh + 1);
    wp_ = std::max(s_.w + s_.pl, (s_.ow - 1) * s_.sw + (s_.kw - 1) * s_.dw + 1);
    if (virtual_rows_ && (s_.oh - 1) * wp_ + s_.ow < 16) return;
    for (int64_t at = 0; at < k; at += 32) {
      const int64_t r = at / run, ky = s_.dw == 1 ? r : r / s_.kw, kx = s_.dw == 1 ? 0 : r % s_.kw;
      step_off_.push_back((ky * s_.dh * wp_ + kx * s_.dw) * s_.c + at % run);
    }
  }

  void run_in_place(const ConvArgs& a, const float* r) const {
    // The padded bf16 copy, on this thread (the one running the Program) for the duration.
    thread_local std::vector<uint16_t> copy;
    const int64_t row = wp_ * a.c, image = hp_ * row, slack = (16 * a.sw + a.kw * a.dw) * a.c;
    copy.resize(static_cast<size_t>(a.n * image + slack));
    uint16_t* xp = copy.data();
    std::fill(xp + a.n * image, xp + a.n * image + slack, uint16_t{0});
    parallel_for(a.n * hp_, 4, [&](int64_t r0, int64_t r1) {
      for (int64_t q = r0; q < r1; ++q) {
        uint16_t* d = xp + q * row;
        const int64_t iy = q % hp_ - a.pt;
        if (iy < 0 || iy >= a.h) {
          std::fill(d, d + row, uint16_t{0});
          continue;
        }
        std::fill(d, d + a.pl * a.c, uint16_t{0});
        gemm_->to_bf16(a.x + ((q / hp_) * a.h + iy) * a.w * a.c, d + a.pl * a.c, a.w * a.c);
        std::fill(d + (a.pl + a.w) * a.c, d + row, uint16_t{0});
      }
    });
    // Pieces of whole output rows, about 256 pixels each (and with virtual rows at least the
    // 16 of a tile: plan_in_place checked that an image has them). A piece's rows are one GEMM,
    // which streams each panel of B once for all of them.
    const int64_t vw = virtual_rows_ ? wp_ : (a.ow + 15) / 16 * 16;
    const int64_t least = virtual_rows_ && a.ow < 16 ? (16 - a.ow + wp_ - 1) / wp_ + 1 : 1;
    const int64_t chunks = std::max<int64_t>(1, a.oh / std::max(least, 256 / vw));
    const int64_t panels = (a.oc + kGemmNr - 1) / kGemmNr;
    parallel_for(a.n * chunks, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t b = t / chunks, y0 = t % chunks * a.oh / chunks, y1 = (t % chunks + 1) * a.oh / chunks;
        const GemmArgs g{nullptr, 0, a.w_packed, a.bias, a.y + (b * a.oh + y0) * a.ow * a.oc, a.oc,
                         (y1 - y0 - 1) * vw + (virtual_rows_ ? a.ow : vw), a.oc, a.kh * a.kw * a.c, a.lo, a.hi};
        const uint16_t* origin = xp + b * image + y0 * a.sh * row;
        gemm_->strided(g, origin, step_off_.data(), a.sw * a.c, a.sh * row, vw, a.ow, 0, panels);
        if (finishes()) finish_pixels(a.y, r, (b * a.oh + y0) * a.ow, (b * a.oh + y1) * a.ow, 0, a.oc);
      }
    });
  }

  // finish_pixels on output channels [c0, c1) of Winograd tiles [t0, t1) (T x T pixels, clipped).
  void finish_tiles(const ConvArgs& a, const float* r, int64_t t0, int64_t t1, int64_t c0, int64_t c1) const {
    const int64_t T = wino_tile(algo_), th = (a.oh + T - 1) / T, tw = (a.ow + T - 1) / T;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / (th * tw), oy0 = t / tw % th * T, ox0 = t % tw * T;
      const int64_t ny = std::min(T, a.oh - oy0), nx = std::min(T, a.ow - ox0);
      for (int64_t i = 0; i < ny; ++i) {
        const int64_t p = (b * a.oh + oy0 + i) * a.ow + ox0;
        finish_pixels(a.y, r, p, p + nx, c0, c1);
      }
    }
  }

  // U = G g G^T per (oc, c), in double, then each of the (T+2)^2 points packed as a c x oc B.
  // U is laid out as B^T (oc x c per point), so the writes run along c as the weight's reads do:
  // along oc they would touch a new cache line per value (ResNet-50's Session: 0.9 s).
  void pack_winograd(const float* pw, const float* bias) {
    static const double G4[6][3] = {{1 / 4., 0, 0},          {-1 / 6., -1 / 6., -1 / 6.}, {-1 / 6., 1 / 6., -1 / 6.},
                                    {1 / 24., 1 / 12., 1 / 6.}, {1 / 24., -1 / 12., 1 / 6.}, {0, 0, 1}};
    static const double G2[4][3] = {{1, 0, 0}, {1 / 2., 1 / 2., 1 / 2.}, {1 / 2., -1 / 2., 1 / 2.}, {0, 0, 1}};
    const int64_t A = wino_tile(algo_) + 2, P = A * A, c = s_.c, oc = s_.oc;
    const double(*G)[3] = A == 6 ? G4 : G2;
    std::vector<float> u(static_cast<size_t>(P * c * oc));
    std::vector<double> gg(static_cast<size_t>(A * 3 * c));  // G g of one output channel: [A][3][c]
    for (int64_t o = 0; o < oc; ++o) {
      const float* g = pw + o * 9 * c;  // [ky][kx][c]
      for (int64_t i = 0; i < A; ++i)
        for (int kx = 0; kx < 3; ++kx) {
          double* d = gg.data() + (i * 3 + kx) * c;
          for (int64_t ci = 0; ci < c; ++ci)
            d[ci] = G[i][0] * g[kx * c + ci] + G[i][1] * g[(3 + kx) * c + ci] + G[i][2] * g[(6 + kx) * c + ci];
        }
      for (int64_t i = 0; i < A; ++i)
        for (int64_t j = 0; j < A; ++j) {
          const double* r = gg.data() + i * 3 * c;
          float* d = u.data() + ((i * A + j) * oc + o) * c;
          for (int64_t ci = 0; ci < c; ++ci)
            d[ci] = static_cast<float>(r[ci] * G[j][0] + r[c + ci] * G[j][1] + r[2 * c + ci] * G[j][2]);
        }
    }
    auto b = std::make_shared<PackedB>();
    b->gemm = gemm_;
    b->n = oc;
    b->k = c;
    group_stride_ = gemm_->packed_size(oc, c);
    b->w.resize(static_cast<size_t>(P * group_stride_));
    for (int64_t xi = 0; xi < P; ++xi)
      gemm_->pack(u.data() + xi * c * oc, c, true, oc, c, b->w.data() + xi * group_stride_);
    if (bias) b->bias.assign(bias, bias + oc);
    parts_ = PointwiseParts{std::move(b), s_.lo, s_.hi};
  }

  void run_winograd(const ConvArgs& a, const float* r) const {
    const int64_t T = wino_tile(algo_), P = (T + 2) * (T + 2), tiles = wino_tiles(s_, T);
    const int64_t panels = (s_.oc + kGemmNr - 1) / kGemmNr, tile = gemm_->nr / kGemmNr;
    const int64_t threads = bound_threads();
    // Up to ~1 MiB of transformed tiles per block (each GEMM touches only its 1/P of it),
    // at least 12 rows per GEMM. With many tiles, the block count is a multiple of the thread
    // count so equal blocks finish together. With few tiles and weights too large for L2 to
    // serve each thread a copy (ResNet-50's 14x14 stage: 16 tiles, 9 MiB), the threads split
    // the output channels instead, in whole micro-kernel tiles of panels, each transforming the
    // same input but streaming only its share of the weights, and blocks may be twice as
    // large, since re-streaming the weights costs more than L2 misses.
    const int64_t fit = std::max<int64_t>(12, std::min<int64_t>(262144 / (P * (a.c + a.oc)), 96));
    const bool few = tiles < 2 * fit * threads && P * a.c * a.oc > kWinoBigWeights;
    const int64_t splits = few ? std::min<int64_t>((panels + tile - 1) / tile, threads) : 1;
    const int64_t blocks = few ? (tiles + 2 * fit - 1) / (2 * fit) : ((tiles + fit - 1) / fit + threads - 1) / threads * threads;
    const int64_t rows = (tiles + blocks - 1) / blocks;
    parallel_for(blocks * splits, 1, [&](int64_t t0, int64_t t1) {
      float* v = thread_scratch(static_cast<size_t>(P * rows * (a.c + a.oc)));
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t b = t / splits, part = t % splits;
        const int64_t q0 = panel_bound(panels, part, splits, tile), q1 = panel_bound(panels, part + 1, splits, tile);
        const int64_t t_lo = b * rows, t_hi = std::min(tiles, b * rows + rows);
        wino_fn_(a, t_lo, t_hi, q0, q1, v, v + P * rows * a.c);
        if (finishes()) finish_tiles(a, r, t_lo, t_hi, q0 * kGemmNr, std::min(q1 * kGemmNr, a.oc));
      }
    });
  }

  Conv2dShape s_;
  Conv2dAlgorithm algo_;
  const SgemmConfig* gemm_;  // the tier the weights were packed for, whose tile the split uses
  Conv2dFn fn_;
  Conv2dWinoFn wino_fn_;
  int64_t group_stride_ = 0;
  PointwiseParts parts_;  // the packed weights, bias and clamp
  PostOp post_;
  // The in-place plan (plan_in_place): the padded copy's size, the steps, virtual rows or not.
  int64_t hp_ = 0, wp_ = 0;
  std::vector<int64_t> step_off_;
  bool virtual_rows_ = false;
};

// Checks a Conv2D's arguments and geometry (the op layer has already turned a model's bad
// values into ModelError; these keep direct callers memory-safe).
Conv2dShape conv2d_shape(const std::vector<int64_t>& weight_shape, int64_t group, int64_t sh, int64_t sw, int64_t dh,
                         int64_t dw, int64_t pt, int64_t pl, const std::vector<int64_t>& x_shape,
                         const std::vector<int64_t>& y_shape, float lo, float hi) {
  const auto& wt = checked_shape(weight_shape, 4, "weight: expected [oc, kh, kw, c/group], shape");
  if (group < 1) throw ArgError("group must be >= 1");
  check_strides(sh, sw, dh, dw);
  check_pads(pt, pl);
  const auto& x = checked_shape(x_shape, 4, "x_shape");
  const auto& y = checked_shape(y_shape, 4, "y_shape");
  const int64_t oc = wt[0], kh = wt[1], kw = wt[2], cg = wt[3];
  if (oc % group) throw ArgError("weight: output channels not divisible by group");
  if (x[3] != cg * group) throw ArgError("x_shape: expected " + std::to_string(cg * group) + " channels");
  if (y[0] != x[0] || y[3] != oc)
    throw ArgError("y_shape: expected batch " + std::to_string(x[0]) + " and " + std::to_string(oc) + " channels");
  return Conv2dShape{x[0], x[1], x[2], x[3], y[1], y[2], oc, group, kh, kw, sh, sw, dh, dw, pt, pl, lo, hi};
}

}  // namespace

const PointwiseParts* pointwise_parts(const NativeOp& op) {
  const auto* c = dynamic_cast<const Conv2dGemm*>(&op);
  return c ? c->pointwise() : nullptr;
}

MSV0_BIND(m) {
  m.def("conv2d_f32",
        [](const py::array& weight, std::optional<py::array> bias, int64_t group, int64_t sh, int64_t sw, int64_t dh,
           int64_t dw, int64_t pt, int64_t pl, const std::vector<int64_t>& x_shape,
           const std::vector<int64_t>& y_shape, float lo, float hi,
           const std::string& precision_name) -> std::shared_ptr<NativeOp> {
          const Conv2dShape s = conv2d_shape(shape_of(weight), group, sh, sw, dh, dw, pt, pl, x_shape, y_shape, lo, hi);
          if (bias) expect_shape(*bias, {s.oc}, "bias");
          const float* w = in_ptr<float>(weight, "weight");
          const float* b = bias ? in_ptr<float>(*bias, "bias") : nullptr;
          const Precision precision = parse_precision(precision_name);
          const Conv2dAlgorithm algo = conv2d_algorithm(s, precision);
          if (algo == Conv2dAlgorithm::kDepthwise) return make_dwconv2d(s, w, b);
          if (algo == Conv2dAlgorithm::kDirect) return make_direct_conv2d(s, w, b);
          return std::make_shared<Conv2dGemm>(s, algo, w, b, precision);
        },
        py::arg("weight"), py::arg("bias"), py::arg("group"), py::arg("sh"), py::arg("sw"), py::arg("dh"),
        py::arg("dw"), py::arg("pt"), py::arg("pl"), py::arg("x_shape"), py::arg("y_shape"),
        py::arg("lo") = -INFINITY, py::arg("hi") = INFINITY, py::arg("precision") = "fp32",
        "The NHWC float32 Conv2D kernel object for these shapes: weight [oc, kh, kw, c/group] packed once for "
        "the algorithm conv2d_algorithm picks; its name is that algorithm. With precision bf16 or fp16, im2col "
        "and gemm1x1 round weights and activations to it; the other algorithms run fp32.");
  m.def("conv2d_algorithm",
        [](const std::vector<int64_t>& weight_shape, int64_t group, int64_t sh, int64_t sw, int64_t dh, int64_t dw,
           int64_t pt, int64_t pl, const std::vector<int64_t>& x_shape, const std::vector<int64_t>& y_shape,
           const std::string& precision) {
          return std::string(conv2d_algorithm_name(conv2d_algorithm(
              conv2d_shape(weight_shape, group, sh, sw, dh, dw, pt, pl, x_shape, y_shape, -INFINITY, INFINITY),
              parse_precision(precision))));
        },
        py::arg("weight_shape"), py::arg("group"), py::arg("sh"), py::arg("sw"), py::arg("dh"), py::arg("dw"),
        py::arg("pt"), py::arg("pl"), py::arg("x_shape"), py::arg("y_shape"), py::arg("precision") = "fp32",
        "The algorithm conv2d_f32 picks for this geometry (and precision, on this CPU): depthwise, direct, "
        "gemm1x1, im2col or winograd.");
  m.def("with_residual",
        [](const NativeOp& producer, const NativeOp& binary, bool first) -> std::shared_ptr<NativeOp> {
          const auto* conv = dynamic_cast<const Conv2dGemm*>(&producer);
          const BinaryArgs* g = binary_args(binary);
          if (!conv || !g) return nullptr;
          const auto& y = conv->outputs()[0].shape;
          // A broadcast operand (a per-channel scale) stays a step of its own. Operand b: y op r
          // equals r op y only where op commutes.
          if (g->a_kind != kOperandFull || g->b_kind != kOperandFull) return nullptr;
          if (!first && g->op != kBinAdd && g->op != kBinMul) return nullptr;
          if (binary.inputs()[0].shape != y || binary.inputs()[1].shape != y || binary.outputs()[0].shape != y)
            throw ArgError("binary: its operands and output are not the producer's output shape");
          return conv->with_residual(*g);
        },
        py::arg("producer"), py::arg("binary"), py::arg("first"),
        "A copy of a Conv2D kernel object (im2col, gemm1x1 or winograd; sharing its packed weights) that also "
        "runs the float Binary object on each block of output as it writes it, its output being the Binary's "
        "operand a (first) or b and the other operand the copy's second input; the Binary's output is the "
        "copy's. None for other producers, a producer with a post-op, and an operand b under an op that does "
        "not commute.");
}

}  // namespace msv0
#endif
