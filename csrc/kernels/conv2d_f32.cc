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
  const float* w_packed;  // group blocks of sgemm_packed_size(og, kh*kw*cg) floats
  int64_t w_group_stride;
  const float* bias;  // oc floats, or null
  int64_t n, h, w, c, oh, ow, oc, group;
  int64_t kh, kw, sh, sw, dh, dw, pt, pl;
  float lo, hi;
};

// Output pixels [p0, p1) of the flattened (n, oh, ow), and in every group the output channels of
// B panels [q0, q1) (16 channels each); buf holds (p1 - p0) * kh*kw*c/group floats (unused by
// the 1x1 path). Reads of x are bounds-checked per tap, so any oh/ow is safe.
using Conv2dFn = void (*)(const ConvArgs&, int64_t p0, int64_t p1, int64_t q0, int64_t q1, float* buf);
MSV0_DECLARE(conv2d_f32, Conv2dFn)

// Winograd F(4x4, 3x3) for 3x3 stride-1 undilated group-1 convs: w_packed holds 36 packed B
// blocks (c x oc each, w_group_stride apart), one per point of the 6x6 transformed tile.
// Tiles [t0, t1) of the flattened (n, ceil(oh/4), ceil(ow/4)), output channels of B panels
// [q0, q1); v holds 36*(t1-t0)*c floats and m 36*(t1-t0)*oc. Taps outside x read as zero;
// outputs past oh/ow are not written.
constexpr int64_t kWinoTile = 4;
using Conv2dWinoFn = void (*)(const ConvArgs&, int64_t t0, int64_t t1, int64_t q0, int64_t q1, float* v, float* m);
MSV0_DECLARE(conv2d_f32_winograd, Conv2dWinoFn)

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

}  // namespace

void conv2d_f32(const ConvArgs& a, int64_t p0, int64_t p1, int64_t q0, int64_t q1, float* buf) {
  const int64_t cg = a.c / a.group, og = a.oc / a.group, k = a.kh * a.kw * cg;
  const bool direct = a.kh == 1 && a.kw == 1 && a.sh == 1 && a.sw == 1 && a.pt == 0 && a.pl == 0 &&
                      a.oh == a.h && a.ow == a.w;
  const int64_t plane = a.oh * a.ow;
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
    sgemm_f32(ga, 0, p1 - p0, q0, q1);
  }
}

MSV0_EXPORT(conv2d_f32)

namespace {

// B^T d for one 6-point column: the F(4,3) input transform.
void input_1d(const VecF* d, int64_t step, VecF* r, int64_t rstep) {
  const VecF d0 = d[0], d1 = d[step], d2 = d[2 * step], d3 = d[3 * step], d4 = d[4 * step], d5 = d[5 * step];
  const VecF four = VecF::splat(4.f), five = VecF::splat(5.f), two = VecF::splat(2.f);
  r[0] = fmadd(four, d0, d4) - five * d2;
  r[rstep] = (d3 + d4) - four * (d1 + d2);
  r[2 * rstep] = fmadd(four, d1 - d2, d4 - d3);
  r[3 * rstep] = fmadd(two, d3 - d1, d4 - d2);
  r[4 * rstep] = fmadd(two, d1 - d3, d4 - d2);
  r[5 * rstep] = fmadd(four, d1, d5) - five * d3;
}

// A^T m for one 6-point column: the F(4,3) output transform.
void output_1d(const VecF* m, int64_t step, VecF* r, int64_t rstep) {
  const VecF m0 = m[0], m1 = m[step], m2 = m[2 * step], m3 = m[3 * step], m4 = m[4 * step], m5 = m[5 * step];
  const VecF sa = m1 + m2, sb = m3 + m4, da = m1 - m2, db = m3 - m4;
  r[0] = m0 + sa + sb;
  r[rstep] = fmadd(VecF::splat(2.f), db, da);
  r[2 * rstep] = fmadd(VecF::splat(4.f), sb, sa);
  r[3 * rstep] = fmadd(VecF::splat(8.f), db, da) + m5;
}

}  // namespace

void conv2d_f32_winograd(const ConvArgs& a, int64_t t0, int64_t t1, int64_t q0, int64_t q1, float* v, float* m) {
  const int64_t rows = t1 - t0, th = (a.oh + kWinoTile - 1) / kWinoTile, tw = (a.ow + kWinoTile - 1) / kWinoTile;
  VecF d[36], t[36];
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t tile = t0 + r, b = tile / (th * tw), ty = tile / tw % th, tx = tile % tw;
    const int64_t iy0 = ty * kWinoTile - a.pt, ix0 = tx * kWinoTile - a.pl;
    for (int64_t c = 0; c < a.c; c += VecF::kLanes) {
      const int64_t lanes = min_i(VecF::kLanes, a.c - c);
      for (int64_t i = 0; i < 6; ++i) {
        const int64_t iy = iy0 + i;
        for (int64_t j = 0; j < 6; ++j) {
          const int64_t ix = ix0 + j;
          d[i * 6 + j] = iy < 0 || iy >= a.h || ix < 0 || ix >= a.w
                             ? VecF::zero()
                             : VecF::load_tail(a.x + ((b * a.h + iy) * a.w + ix) * a.c + c, lanes);
        }
      }
      for (int j = 0; j < 6; ++j) input_1d(d + j, 6, t + j, 6);  // columns
      for (int i = 0; i < 6; ++i) input_1d(t + i * 6, 1, d + i * 6, 1);  // rows
      for (int xi = 0; xi < 36; ++xi) d[xi].store_tail(v + (xi * rows + r) * a.c + c, lanes);
    }
  }
  for (int xi = 0; xi < 36; ++xi) {
    const GemmArgs ga{v + xi * rows * a.c, a.c, a.w_packed + xi * a.w_group_stride, nullptr, m + xi * rows * a.oc,
                      a.oc, rows, a.oc, a.c, -INFINITY, INFINITY};
    sgemm_f32(ga, 0, rows, q0, q1);
  }
  const VecF lo = VecF::splat(a.lo), hi = VecF::splat(a.hi);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t tile = t0 + r, b = tile / (th * tw), ty = tile / tw % th, tx = tile % tw;
    const int64_t oy0 = ty * kWinoTile, ox0 = tx * kWinoTile;
    const int64_t ny = min_i(kWinoTile, a.oh - oy0), nx = min_i(kWinoTile, a.ow - ox0);
    for (int64_t o = q0 * kGemmNr, oe = min_i(q1 * kGemmNr, a.oc); o < oe; o += VecF::kLanes) {
      const int64_t lanes = min_i(VecF::kLanes, oe - o);
      for (int xi = 0; xi < 36; ++xi) d[xi] = VecF::load_tail(m + (xi * rows + r) * a.oc + o, lanes);
      for (int j = 0; j < 6; ++j) output_1d(d + j, 6, t + j, 6);  // columns: 4 x 6
      for (int i = 0; i < 4; ++i) output_1d(t + i * 6, 1, d + i * 4, 1);  // rows: 4 x 4
      const VecF bias = a.bias ? VecF::load_tail(a.bias + o, lanes) : VecF::zero();
      for (int64_t i = 0; i < ny; ++i)
        for (int64_t j = 0; j < nx; ++j)
          clamp(d[i * 4 + j] + bias, lo, hi).store_tail(a.y + ((b * a.oh + oy0 + i) * a.ow + ox0 + j) * a.oc + o, lanes);
    }
  }
}

MSV0_EXPORT(conv2d_f32_winograd)
}  // namespace MSV0_ISA
}  // namespace msv0

#else  // binding pass
#include <algorithm>
#include <optional>
#include <vector>
#include <pybind11/stl.h>

#include "runtime/native.h"

namespace msv0 {

// Where part `part` of `splits` equal shares of `panels` B panels starts: on a pair boundary
// (pairs are the widest micro-kernel tile) when the pairs divide evenly, else on any panel, as
// a lone panel costs less than one thread doing a whole extra pair (ten panels: 5 + 5, not 4 + 6).
int64_t panel_bound(int64_t panels, int64_t part, int64_t splits) {
  const int64_t pairs = (panels + 1) / 2;
  return pairs % splits == 0 ? std::min(panels, 2 * (pairs * part / splits)) : panels * part / splits;
}

// A Conv2D whose weight [oc, kh, kw, c/group] ("KHWC") is packed once per Session: group g's
// rows form B^T (og x kh*kw*cg) of its GEMM.
class Conv2dF32 {
 public:
  // out_tiles: how many 4x4 output tiles the Session's shape has (n * ceil(oh/4) * ceil(ow/4)),
  // which decides whether Winograd pays; 0 keeps im2col.
  Conv2dF32(const py::array& weight, std::optional<py::array> bias, int64_t group, int64_t sh, int64_t sw,
            int64_t dh, int64_t dw, int64_t pt, int64_t pl, int64_t out_tiles)
      : group_(group), sh_(sh), sw_(sw), dh_(dh), dw_(dw), pt_(pt), pl_(pl) {
    if (weight.ndim() != 4) throw ArgError("weight: expected [oc, kh, kw, c/group]");
    if (group < 1) throw ArgError("group must be >= 1");
    check_strides(sh, sw, dh, dw);
    check_pads(pt, pl);
    const float* pw = in_ptr<float>(weight, "weight");
    oc_ = weight.shape(0);
    kh_ = weight.shape(1);
    kw_ = weight.shape(2);
    cg_ = weight.shape(3);
    if (oc_ % group) throw ArgError("weight: output channels not divisible by group");
    const int64_t og = oc_ / group, k = kh_ * kw_ * cg_;
    winograd_ = kh_ == 3 && kw_ == 3 && sh == 1 && sw == 1 && dh == 1 && dw == 1 && group == 1 &&
                cg_ >= kWinoMinChannels && oc_ >= kWinoMinChannels && out_tiles >= kWinoMinTiles;
    if (winograd_) {
      pack_winograd(pw);
      store_bias(bias);
      return;
    }
    group_stride_ = sgemm_packed_size(og, k);
    packed_.resize(static_cast<size_t>(group_stride_ * group));
    for (int64_t g = 0; g < group; ++g)
      sgemm_pack_b(pw + g * og * k, k, true, og, k, packed_.data() + g * group_stride_);
    store_bias(bias);
  }

  bool winograd() const { return winograd_; }

  // x: n x h x w x (group*cg); y: n x oh x ow x oc, written fully.
  void run(const py::array& x, py::array& y, float lo, float hi) const {
    if (x.ndim() != 4 || x.shape(3) != cg_ * group_)
      throw ArgError("x: expected NHWC with " + std::to_string(cg_ * group_) + " channels");
    if (y.ndim() != 4 || y.shape(0) != x.shape(0) || y.shape(3) != oc_)
      throw ArgError("y: expected NHWC with batch " + std::to_string(x.shape(0)) + " and " +
                     std::to_string(oc_) + " channels");
    const ConvArgs a = args(in_ptr<float>(x, "x"), out_ptr<float>(y, "y"), x.shape(0), x.shape(1), x.shape(2),
                            y.shape(1), y.shape(2), lo, hi);
    py::gil_scoped_release unlocked;
    execute(a);
  }

  // The arguments of one run on raw NHWC buffers of the given sizes.
  ConvArgs args(const float* x, float* y, int64_t n, int64_t h, int64_t w, int64_t oh, int64_t ow, float lo,
                float hi) const {
    return ConvArgs{x, y, packed_.data(), group_stride_, bias_.empty() ? nullptr : bias_.data(),
                    n, h, w, cg_ * group_, oh, ow, oc_, group_, kh_, kw_, sh_, sw_, dh_, dw_, pt_, pl_, lo, hi};
  }

  int64_t channels() const { return cg_ * group_; }
  int64_t out_channels() const { return oc_; }

  // Runs over the bound pool; the GIL must be released.
  void execute(const ConvArgs& a) const {
    if (winograd_) return run_winograd(a);
    const int64_t pixels = a.n * a.oh * a.ow, k = kh_ * kw_ * cg_;
    const int64_t panels = (oc_ / group_ + kGemmNr - 1) / kGemmNr;
    const ThreadPool* pool = bound_pool();
    const int64_t threads = pool ? pool->size() : 1;
    // Each tile of pixels streams all of B once (the SGEMM packs A per k block, so a large
    // gathered tile costs nothing in L1), so tiles are as large as ~240 rows allow. When there
    // are too few pixels to give every thread a tile of >= 48 rows, the threads split the output
    // channels instead, in pairs of panels (the widest micro-kernel tile), and each streams only
    // its share of B: ResNet-50's 7x7 stage has 49 pixels and 9 MiB of weights.
    const int64_t pixel_tiles = pixels >= 48 * threads ? std::max<int64_t>((pixels + 239) / 240, threads)
                                                       : (pixels + 239) / 240;
    const int64_t rows = (pixels + pixel_tiles - 1) / pixel_tiles;  // equal tiles balance two threads
    const int64_t tiles = (pixels + rows - 1) / rows;
    const int64_t pairs = (panels + 1) / 2;
    const int64_t splits = tiles >= threads ? 1 : std::min<int64_t>(pairs, threads);
    const Conv2dFn fn = MSV0_DISPATCH(conv2d_f32);
    parallel_for(tiles * splits, 1, [&](int64_t t0, int64_t t1) {
      float* buf = thread_scratch(static_cast<size_t>(rows * k));
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t tile = t / splits, part = t % splits;
        const int64_t q0 = panel_bound(panels, part, splits), q1 = panel_bound(panels, part + 1, splits);
        fn(a, tile * rows, std::min(pixels, tile * rows + rows), q0, q1, buf);
      }
    });
  }

 private:
  // Winograd needs enough channels for its transforms to vectorise and enough tiles for each
  // transformed weight block (c x oc) to be reused across several GEMM rows: its weights are
  // 4x those of im2col, streamed from memory once per run. ResNet-50's 14x14 stage (16 tiles)
  // runs 1.5x faster on it; its 7x7 stage (4 tiles, 36 MiB of transformed weights) loses.
  static constexpr int64_t kWinoMinChannels = 16, kWinoMinTiles = 16;
  // Transformed weight floats above which threads split output channels rather than tiles
  // (each then repeats the input transform, which small layers cannot afford).
  static constexpr int64_t kWinoBigWeights = 1 << 20;

  void store_bias(const std::optional<py::array>& bias) {
    if (bias) {
      expect_shape(*bias, {oc_}, "bias");
      const float* pb = in_ptr<float>(*bias, "bias");
      bias_.assign(pb, pb + oc_);
    }
  }

  // U = G g G^T per (oc, c), in double, then each of the 36 points packed as a c x oc B.
  void pack_winograd(const float* pw) {
    static const double G[6][3] = {{1 / 4., 0, 0},          {-1 / 6., -1 / 6., -1 / 6.}, {-1 / 6., 1 / 6., -1 / 6.},
                                   {1 / 24., 1 / 12., 1 / 6.}, {1 / 24., -1 / 12., 1 / 6.}, {0, 0, 1}};
    const int64_t c = cg_, oc = oc_;
    std::vector<float> u(static_cast<size_t>(36 * c * oc));
    for (int64_t o = 0; o < oc; ++o)
      for (int64_t ci = 0; ci < c; ++ci) {
        double gg[6][3];  // G g
        for (int i = 0; i < 6; ++i)
          for (int kx = 0; kx < 3; ++kx) {
            double acc = 0;
            for (int ky = 0; ky < 3; ++ky) acc += G[i][ky] * pw[((o * 3 + ky) * 3 + kx) * c + ci];
            gg[i][kx] = acc;
          }
        for (int i = 0; i < 6; ++i)
          for (int j = 0; j < 6; ++j) {
            double acc = 0;
            for (int kx = 0; kx < 3; ++kx) acc += gg[i][kx] * G[j][kx];
            u[static_cast<size_t>(((i * 6 + j) * c + ci) * oc + o)] = static_cast<float>(acc);
          }
      }
    group_stride_ = sgemm_packed_size(oc, c);
    packed_.resize(static_cast<size_t>(36 * group_stride_));
    for (int64_t xi = 0; xi < 36; ++xi)
      sgemm_pack_b(u.data() + xi * c * oc, oc, false, oc, c, packed_.data() + xi * group_stride_);
  }

  void run_winograd(const ConvArgs& a) const {
    const int64_t tiles = a.n * ((a.oh + kWinoTile - 1) / kWinoTile) * ((a.ow + kWinoTile - 1) / kWinoTile);
    const int64_t panels = (oc_ + kGemmNr - 1) / kGemmNr, pairs = (panels + 1) / 2;
    const ThreadPool* pool = bound_pool();
    const int64_t threads = pool ? pool->size() : 1;
    // Up to ~1 MiB of transformed tiles per block (each GEMM touches only its 1/36 of it),
    // at least 12 rows per GEMM. With many tiles, the block count is a multiple of the thread
    // count so equal blocks finish together. With few tiles and weights too large for L2 to
    // serve each thread a copy (ResNet-50's 14x14 stage: 16 tiles, 9 MiB), the threads split the output channels instead, in pairs
    // of panels, each transforming the same input but streaming only its share of the weights,
    // and blocks may be twice as large, since re-streaming the weights costs more than L2 misses.
    const int64_t fit = std::max<int64_t>(12, std::min<int64_t>(262144 / (36 * (a.c + a.oc)), 96));
    const bool few = tiles < 2 * fit * threads && 36 * a.c * a.oc > kWinoBigWeights;
    const int64_t splits = few ? std::min<int64_t>(pairs, threads) : 1;
    const int64_t blocks = few ? (tiles + 2 * fit - 1) / (2 * fit) : ((tiles + fit - 1) / fit + threads - 1) / threads * threads;
    const int64_t rows = (tiles + blocks - 1) / blocks;
    const Conv2dWinoFn fn = MSV0_DISPATCH(conv2d_f32_winograd);
    parallel_for(blocks * splits, 1, [&](int64_t t0, int64_t t1) {
      float* v = thread_scratch(static_cast<size_t>(36 * rows * (a.c + a.oc)));
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t b = t / splits, part = t % splits;
        const int64_t q0 = panel_bound(panels, part, splits), q1 = panel_bound(panels, part + 1, splits);
        fn(a, b * rows, std::min(tiles, b * rows + rows), q0, q1, v, v + 36 * rows * a.c);
      }
    });
  }

  int64_t group_, sh_, sw_, dh_, dw_, pt_, pl_;
  int64_t oc_ = 0, kh_ = 0, kw_ = 0, cg_ = 0, group_stride_ = 0;
  bool winograd_ = false;
  std::vector<float> packed_, bias_;
};

// A Conv2D on raw buffers with its input and output sizes fixed at plan time, for a Program.
class Conv2dOp : public NativeOp {
 public:
  Conv2dOp(std::shared_ptr<const Conv2dF32> conv, int64_t n, int64_t h, int64_t w, int64_t oh, int64_t ow, float lo,
           float hi)
      : conv_(std::move(conv)), n_(n), h_(h), w_(w), oh_(oh), ow_(ow), lo_(lo), hi_(hi) {}
  void run(const void* const* in, void* const* out) const override {
    conv_->execute(conv_->args(static_cast<const float*>(in[0]), static_cast<float*>(out[0]), n_, h_, w_, oh_, ow_,
                               lo_, hi_));
  }

 private:
  std::shared_ptr<const Conv2dF32> conv_;
  int64_t n_, h_, w_, oh_, ow_;
  float lo_, hi_;
};

MSV0_BIND(m) {
  py::class_<Conv2dOp, NativeOp, std::shared_ptr<Conv2dOp>>(m, "Conv2dOp");
  py::class_<Conv2dF32, std::shared_ptr<Conv2dF32>>(m, "Conv2dF32",
                        "NHWC float32 Conv2D with its KHWC weight packed once; run(x, y, lo, hi).")
      .def(py::init<const py::array&, std::optional<py::array>, int64_t, int64_t, int64_t, int64_t, int64_t,
                    int64_t, int64_t, int64_t>(),
           py::arg("weight"), py::arg("bias"), py::arg("group"), py::arg("sh"), py::arg("sw"), py::arg("dh"),
           py::arg("dw"), py::arg("pt"), py::arg("pl"), py::arg("out_tiles") = 0)
      .def_property_readonly("winograd", &Conv2dF32::winograd)
      .def("run", &Conv2dF32::run, py::arg("x"), py::arg("y"), py::arg("lo") = -INFINITY,
           py::arg("hi") = INFINITY)
      .def("native", [](std::shared_ptr<Conv2dF32> c, const std::vector<int64_t>& x_shape,
                        const std::vector<int64_t>& y_shape, float lo, float hi) {
             if (x_shape.size() != 4 || y_shape.size() != 4 || x_shape[3] != c->channels() ||
                 y_shape[0] != x_shape[0] || y_shape[3] != c->out_channels())
               throw ArgError("native: x/y shapes do not fit this Conv2D");
             for (int64_t d : x_shape) if (d < 0) throw ArgError("native: negative dim");
             for (int64_t d : y_shape) if (d < 0) throw ArgError("native: negative dim");
             return std::shared_ptr<NativeOp>(std::make_shared<Conv2dOp>(
                 std::move(c), x_shape[0], x_shape[1], x_shape[2], y_shape[1], y_shape[2], lo, hi));
           }, py::arg("x_shape"), py::arg("y_shape"), py::arg("lo") = -INFINITY, py::arg("hi") = INFINITY,
           "A NativeOp running this conv from an NHWC x_shape into y_shape.");
}

}  // namespace msv0
#endif
