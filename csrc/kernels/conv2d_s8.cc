// Conv2D int8, NHWC, with r1.1's arithmetic (format-v0.md §3.1) on the packed int8 GEMM
// (gemm_s8.h): per group, the im2col rows of x (one per output pixel, kh·kw·cg values in the
// weight's order) times the group's weight rows, requantized per output channel in the GEMM's
// epilogue. A 1x1 stride-1 unpadded conv reads x's NHWC rows as they are; other convs gather a
// tile of rows at a time into per-thread scratch, padding taps as x_zp so they add 0 to
// Σ(x − x_zp)(w − w_zp). Where the GEMM slot reads rows in place (AMX), a conv whose windows
// split into whole 64-byte steps of x reads the windows of the pixels inside x where they lie
// (no gather), and gathers only its border. Conv2dS8Dynamic runs the same tiles on dynamically quantized input (uint8
// codes and a zero point as float32, from the converter's DynamicQuantizeLinear) with a float32
// epilogue. This file has no per-tier code: the gather is memcpy/memset (libc picks its own ISA)
// and every product runs in the active tier's gemm_s8 slot.
#include "kernels/gemm_s8.h"

#include "kernels/kernel.h"

#if MSV0_ONCE
#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <pybind11/stl.h>

#include "kernels/quant_cast.h"
#include "runtime/native.h"
#include "runtime/weight_memory.h"

namespace msv0 {

namespace {

// Output pixels per gathered tile: enough rows to amortise streaming the group's packed
// weights once per tile, few enough that the tile (rows x k bytes) stays near L2.
constexpr int64_t kTileRows = 240;
// Below this many pixels per thread, threads split the output channels instead.
constexpr int64_t kMinThreadRows = 48;

// Slack after the gather buffer: copy_run writes whole blocks of this many bytes.
constexpr int64_t kCopyBlock = 16;

// Runs of up to this many blocks are copied as whole blocks (see copy_run).
constexpr int64_t kShortRunBlocks = 4;

void copy_blocks(int8_t* dst, const int8_t* src, int64_t blocks) {
  for (int64_t i = 0; i < blocks * kCopyBlock; i += kCopyBlock) std::memcpy(dst + i, src + i, kCopyBlock);
}

// n bytes from src to dst. A short run is copied as whole kCopyBlock blocks where src's buffer
// (ending at src_end) allows the over-read, writing up to kCopyBlock − 1 bytes past dst + n,
// which the row's next run (or the buffer's slack) overwrites: the stem's runs are 21 bytes,
// shorter than a libc memcpy call's own cost.
void copy_run(int8_t* dst, const int8_t* src, int64_t n, const int8_t* src_end) {
  const int64_t blocks = (n + kCopyBlock - 1) / kCopyBlock;
  if (blocks > kShortRunBlocks || src_end - src < blocks * kCopyBlock) {
    std::memcpy(dst, src, static_cast<size_t>(n));
    return;
  }
  copy_blocks(dst, src, blocks);
}

// Where part `part` of `splits` shares of `panels` starts, on a micro-kernel tile boundary.
int64_t panel_bound(int64_t panels, int64_t part, int64_t splits, int64_t tile) {
  const int64_t tiles = (panels + tile - 1) / tile;
  return std::min(panels, tiles * part / splits * tile);
}

// A Conv2D's geometry and packed weights, and the tiled im2col GEMM that both int8 convolutions
// run: Conv2dS8 requantizes the sums to int8 (r1.1), Conv2dS8Dynamic scales them to float32.
class ConvS8Core {
 public:
  // weight [oc, kh, kw, c/group] int8; w_zp: oc int32.
  ConvS8Core(const py::array& weight, const py::array& w_zp, int64_t group, int64_t sh, int64_t sw, int64_t dh,
             int64_t dw, int64_t pt, int64_t pl, const std::vector<int64_t>& x_shape,
             const std::vector<int64_t>& y_shape)
      : kernel_(gemm_s8_kernel()), group_(group), sh_(sh), sw_(sw), dh_(dh), dw_(dw), pt_(pt), pl_(pl) {
    const std::vector<int64_t> wt = checked_shape(shape_of(weight), 4, "weight: expected [oc, kh, kw, c/group], shape");
    if (group < 1) throw ArgError("group must be >= 1");
    check_strides(sh, sw, dh, dw);
    check_pads(pt, pl);
    const auto& x = checked_shape(x_shape, 4, "x_shape");
    const auto& y = checked_shape(y_shape, 4, "y_shape");
    oc_ = wt[0], kh_ = wt[1], kw_ = wt[2], cg_ = wt[3];
    if (oc_ % group) throw ArgError("weight: output channels not divisible by group");
    if (x[3] != cg_ * group) throw ArgError("x_shape: expected " + std::to_string(cg_ * group) + " channels");
    if (y[0] != x[0] || y[3] != oc_)
      throw ArgError("y_shape: expected batch " + std::to_string(x[0]) + " and " + std::to_string(oc_) + " channels");
    n_ = x[0], h_ = x[1], w_ = x[2], c_ = x[3], oh_ = y[1], ow_ = y[2];
    og_ = oc_ / group;
    k_ = kh_ * kw_ * cg_;
    cols_ = (og_ + kGemmS8Nr - 1) / kGemmS8Nr * kGemmS8Nr;
    direct_ = kh_ == 1 && kw_ == 1 && sh == 1 && sw == 1 && pt == 0 && pl == 0 && oh_ == h_ && ow_ == w_;
    const int8_t* pw = in_ptr<int8_t>(weight, "weight");
    b_zp_ = per_group<int32_t>(w_zp, "w_zp");
    for (int32_t z : b_zp_) int8_param(z, "w_zp");
    symmetric_ = std::all_of(b_zp_.begin(), b_zp_.end(), [](int32_t z) { return z == 0; });
    // Group g's weight rows form B^T (og x k) of its GEMM.
    group_bytes_ = gemm_s8_packed_size(og_, k_);
    packed_.resize(static_cast<size_t>(group_bytes_ * group));
    b_sum_.resize(static_cast<size_t>(group * cols_));
    for (int64_t g = 0; g < group; ++g)
      kernel_.pack(pw + g * og_ * k_, k_, true, og_, k_, packed_.data() + g * group_bytes_,
                   b_sum_.data() + g * cols_);
    plan_in_place();
  }

 protected:
  // What one run gives every tile: x's zero point (the padding taps' value), the int32 bias and
  // the GEMM's epilogue, per output channel in per_group's layout: requantization to int8 y8, or
  // float32 yf = clamp(float(acc) · scale (+ fbias), yf_lo, yf_hi).
  struct Epilogue {
    int32_t x_zp;
    const int32_t* bias;
    const int32_t *mult = nullptr, *left = nullptr, *right = nullptr;
    int32_t y_zp = 0, lo = -128, hi = 127;
    int8_t* y8 = nullptr;
    float* yf = nullptr;
    const float *scale = nullptr, *fbias = nullptr;
    float yf_lo = -INFINITY, yf_hi = INFINITY;
  };

  // Array a's oc values, one per output channel, as each group's og padded with zeros to cols_
  // (whole panels, as the GEMM loads them as vectors).
  template <class T>
  std::vector<T> per_group(const py::array& a, const char* what) const {
    expect_shape(a, {oc_}, what);
    const T* p = in_ptr<T>(a, what);
    std::vector<T> v(static_cast<size_t>(group_ * cols_), T{0});
    for (int64_t g = 0; g < group_; ++g) std::copy(p + g * og_, p + (g + 1) * og_, v.begin() + g * cols_);
    return v;
  }

  void run_tiles(const int8_t* x, const Epilogue& e) const {
    const int64_t pixels = n_ * oh_ * ow_, panels = cols_ / kGemmS8Nr, tile = kernel_.nr / kGemmS8Nr;
    if (pixels == 0 || og_ == 0) return;
    if (in_place() && e.y8) return run_in_place(x, e);
    const int64_t threads = bound_threads();
    // As in conv2d_f32: tiles of up to kTileRows pixels, at least one per thread; with too few
    // pixels for that, the threads split each tile's output channels and stream only their
    // share of the weights (ResNet-50's 7x7 stage: 49 pixels, 2.3 MiB of weights).
    const int64_t want = pixels >= kMinThreadRows * threads ? std::max((pixels + kTileRows - 1) / kTileRows, threads)
                                                             : (pixels + kTileRows - 1) / kTileRows;
    const int64_t rows = (pixels + want - 1) / want, tiles = (pixels + rows - 1) / rows;
    const int64_t splits = tiles >= threads ? 1 : std::min((panels + tile - 1) / tile, threads);
    const int64_t gemm_bytes = (gemm_s8_scratch_bytes(k_, kernel_.mr) + 63) / 64 * 64;
    const int64_t buf_bytes = direct_ ? 0 : rows * k_ + kCopyBlock;
    parallel_for(tiles * splits, 1, [&](int64_t t0, int64_t t1) {
      auto* scratch = reinterpret_cast<int8_t*>(thread_scratch(static_cast<size_t>((gemm_bytes + buf_bytes) / 4 + 1)));
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t part = t % splits, p0 = t / splits * rows, p1 = std::min(pixels, p0 + rows);
        run_tile(x, e, p0, p1, panel_bound(panels, part, splits, tile), panel_bound(panels, part + 1, splits, tile),
                 scratch, scratch + gemm_bytes);
      }
    });
  }

  // Whether the windows of inside pixels are read in place (plan_in_place).
  bool in_place() const { return !pieces_.empty(); }

  const GemmS8Kernel& kernel_;  // the slot of the tier active at construction, which packed B
  int64_t group_, sh_, sw_, dh_, dw_, pt_, pl_;
  int64_t n_ = 0, h_ = 0, w_ = 0, c_ = 0, oh_ = 0, ow_ = 0, oc_ = 0, kh_ = 0, kw_ = 0, cg_ = 0;
  int64_t og_ = 0, k_ = 0, cols_ = 0, group_bytes_ = 0;

 private:
  // Pixels [p0, p1) of the flattened (n, oh, ow), B panels [q0, q1) of every group.
  void run_tile(const int8_t* x, const Epilogue& e, int64_t p0, int64_t p1, int64_t q0, int64_t q1, int8_t* scratch,
                int8_t* buf) const {
    for (int64_t g = 0; g < group_; ++g) {
      const int8_t* a = x + p0 * c_ + g * cg_;
      int64_t lda = c_;
      if (!direct_) {
        int8_t* row = buf;
        // The pixel's (batch, oy, ox) stepped along rather than divided out per pixel.
        int64_t b = p0 / (oh_ * ow_), oy = p0 / ow_ % oh_, ox = p0 % ow_;
        for (int64_t p = p0; p < p1; ++p, row += k_) {
          gather_row(x, e.x_zp, b, oy, ox, g * cg_, row);
          if (++ox == ow_) {
            ox = 0;
            if (++oy == oh_) oy = 0, ++b;
          }
        }
        a = buf;
        lda = k_;
      }
      kernel_.fn(gemm_args(e, g, a, lda, p0 * oc_ + g * og_, oc_, p1 - p0), 0, p1 - p0, q0, q1, scratch);
    }
  }

  // Group g's GEMM of m rows of A (a, row stride lda) into the output from element y0 on, rows
  // ldc apart.
  GemmS8Args gemm_args(const Epilogue& e, int64_t g, const int8_t* a, int64_t lda, int64_t y0, int64_t ldc,
                       int64_t m) const {
    const int64_t col = g * cols_;
    GemmS8Args args{a, lda, packed_.data() + g * group_bytes_, b_sum_.data() + col,
                    symmetric_ ? nullptr : b_zp_.data() + col, e.bias + col,
                    e.mult ? e.mult + col : nullptr, e.left ? e.left + col : nullptr,
                    e.right ? e.right + col : nullptr, e.x_zp, e.y_zp, e.lo, e.hi, nullptr,
                    e.y8 ? e.y8 + y0 : nullptr, ldc, m, og_, k_};
    if (e.yf) {
      args.cf = e.yf + y0;
      args.c_scale = e.scale + col;
      args.c_bias = e.fbias ? e.fbias + col : nullptr;
      args.c_lo = e.yf_lo, args.c_hi = e.yf_hi;
    }
    return args;
  }

  // The in-place plan: where every tap of a pixel's window lies inside x, and its k splits into
  // 64-byte steps each inside one run of x (a window row of kw·c bytes, or one tap's c), the
  // GEMM slot reads the windows of an output row's inside pixels where they lie, sw·c bytes
  // apart (step_off_: each step's offset from the window's first byte). The rest (rows and
  // columns whose windows reach the padding) is gathered as elsewhere. Taken only for int8
  // output, group 1 and symmetric weights, for a 1x1 conv on x's rows (then all of x, in runs of
  // pixels) or a window larger than one pixel (a strided 1x1 conv's rows gather cheaply), and
  // only where an output row has at least 16 inside pixels (one whole AMX tile).
  void plan_in_place() {
    if (!kernel_.strided || !symmetric_ || group_ != 1) return;
    if (direct_) {  // x's rows are A's: runs of up to kTileRows pixels (at least 16) in place
      const int64_t pixels = n_ * h_ * w_;
      if (k_ % kGemmS8Step || pixels < 16) return;
      step_off_.resize(static_cast<size_t>(k_ / kGemmS8Step));
      for (size_t s = 0; s < step_off_.size(); ++s) step_off_[s] = static_cast<int64_t>(s) * kGemmS8Step;
      const int64_t pieces = std::max<int64_t>(1, pixels / kTileRows);
      for (int64_t q = 0; q < pieces; ++q)
        pieces_.push_back({Piece::kRange, 0, q * pixels / pieces, (q + 1) * pixels / pieces, 0, 0});
      return;
    }
    if (k_ == cg_) return;
    const int64_t run = dw_ == 1 ? kw_ * c_ : c_;  // bytes of x per contiguous run of the window
    if (run % kGemmS8Step) return;
    const auto inside = [](int64_t pad, int64_t stride, int64_t span, int64_t size, int64_t out) {
      const int64_t lo = std::min(out, (pad + stride - 1) / stride), last = size - 1 - span + pad;
      return std::make_pair(lo, std::max(lo, last >= 0 ? std::min(out, last / stride + 1) : 0));
    };
    const auto [oy_lo, oy_hi] = inside(pt_, sh_, (kh_ - 1) * dh_, h_, oh_);
    const auto [ox_lo, ox_hi] = inside(pl_, sw_, (kw_ - 1) * dw_, w_, ow_);
    if (ox_hi - ox_lo < 16 || oy_hi == oy_lo) return;
    for (int64_t s = 0; s < k_ / kGemmS8Step; ++s) {
      const int64_t at = s * kGemmS8Step, r = at / run, within = at % run;
      const int64_t ky = dw_ == 1 ? r : r / kw_, kx = dw_ == 1 ? 0 : r % kw_;
      step_off_.push_back((ky * dh_ * w_ + kx * dw_) * c_ + within);
    }
    // Pieces: each image's inside rows, then its rows above and below them in tiles of up to
    // kTileRows pixels, and its left and right columns in tiles of up to kTileRows rows.
    for (int64_t b = 0; b < n_; ++b) {
      for (int64_t oy = oy_lo; oy < oy_hi; ++oy) pieces_.push_back({Piece::kInside, b, oy, oy + 1, ox_lo, ox_hi});
      for (const auto& [y0, y1] : {std::make_pair(int64_t{0}, oy_lo), std::make_pair(oy_hi, oh_)})
        for (int64_t p = (b * oh_ + y0) * ow_; p < (b * oh_ + y1) * ow_; p += kTileRows)
          pieces_.push_back({Piece::kPixels, b, p, std::min((b * oh_ + y1) * ow_, p + kTileRows), 0, 0});
      for (const auto& [x0, x1] : {std::make_pair(int64_t{0}, ox_lo), std::make_pair(ox_hi, ow_)})
        for (int64_t ox = x0; ox < x1; ++ox)
          for (int64_t oy = oy_lo; oy < oy_hi; oy += kTileRows)
            pieces_.push_back({Piece::kColumn, b, oy, std::min(oy_hi, oy + kTileRows), ox, ox + 1});
    }
  }

  void run_in_place(const int8_t* x, const Epilogue& e) const {
    const int64_t panels = cols_ / kGemmS8Nr;
    const int64_t gemm_bytes = (gemm_s8_scratch_bytes(k_, kernel_.mr) + 63) / 64 * 64;
    const int64_t buf_bytes = kTileRows * k_ + kCopyBlock;
    // Fewer pieces than threads (ResNet-50's 1x1 convs at 14x14 and 7x7: one run of pixels):
    // the threads split each piece's output channels, in pairs of panels (an AMX tile's width).
    const int64_t count = static_cast<int64_t>(pieces_.size()), threads = bound_threads();
    const int64_t pairs = (panels + 1) / 2, splits = count >= threads ? 1 : std::min(threads, pairs);
    parallel_for(count * splits, 1, [&](int64_t t0, int64_t t1) {
      int8_t* scratch = nullptr;
      for (int64_t t = t0; t < t1; ++t) {
        const Piece& q = pieces_[static_cast<size_t>(t / splits)];
        const int64_t part = t % splits, q0 = std::min(panels, pairs * part / splits * 2),
                      q1 = std::min(panels, pairs * (part + 1) / splits * 2);
        if (q.kind == Piece::kRange) {
          kernel_.strided(gemm_args(e, 0, x + q.y0 * c_, 0, q.y0 * oc_, oc_, q.y1 - q.y0), step_off_.data(), c_, q0,
                          q1);
          continue;
        }
        if (q.kind == Piece::kInside) {
          const int8_t* a = x + ((q.b * h_ + q.y0 * sh_ - pt_) * w_ + q.x0 * sw_ - pl_) * c_;
          const int64_t y0 = ((q.b * oh_ + q.y0) * ow_ + q.x0) * oc_;
          kernel_.strided(gemm_args(e, 0, a, 0, y0, oc_, q.x1 - q.x0), step_off_.data(), sw_ * c_, q0, q1);
          continue;
        }
        if (!scratch)
          scratch = reinterpret_cast<int8_t*>(thread_scratch(static_cast<size_t>((gemm_bytes + buf_bytes) / 4 + 1)));
        if (q.kind == Piece::kPixels) {
          run_tile(x, e, q.y0, q.y1, q0, q1, scratch, scratch + gemm_bytes);
          continue;
        }
        int8_t* row = scratch + gemm_bytes;
        for (int64_t oy = q.y0; oy < q.y1; ++oy, row += k_) gather_row(x, e.x_zp, q.b, oy, q.x0, 0, row);
        const int64_t y0 = ((q.b * oh_ + q.y0) * ow_ + q.x0) * oc_;
        kernel_.fn(gemm_args(e, 0, scratch + gemm_bytes, k_, y0, ow_ * oc_, q.y1 - q.y0), 0, q.y1 - q.y0, q0, q1,
                   scratch);
      }
    });
  }

  // The im2col row of output pixel (b, oy, ox): its kh x kw window over channels [c0, c0 + cg),
  // taps outside x as x_zp. Every tap is bounds-checked, so any output size is safe.
  void gather_row(const int8_t* x, int32_t x_zp, int64_t b, int64_t oy, int64_t ox, int64_t c0, int8_t* dst) const {
    const int64_t ix0 = ox * sw_ - pl_;
    // One contiguous run of x per window row when undilated, inside, and spanning all channels.
    const bool row_run = dw_ == 1 && cg_ == c_ && ix0 >= 0 && ix0 + kw_ <= w_;
    const int8_t* x_end = x + n_ * h_ * w_ * c_;
    const int64_t run = kw_ * cg_, blocks = (run + kCopyBlock - 1) / kCopyBlock, iy0 = oy * sh_ - pt_;
    if (row_run && blocks <= kShortRunBlocks && iy0 >= 0 && iy0 + (kh_ - 1) * dh_ < h_) {
      // A window inside x of short runs (a stem's 3 channels): whole blocks per run, checked once
      // against x's end for the last run rather than per run as copy_run does (the checks and the
      // per-row index arithmetic were most of MobileNetV2's int8 stem's gather).
      const int64_t step = dh_ * w_ * c_;
      const int8_t* src = x + ((b * h_ + iy0) * w_ + ix0) * c_ + c0;
      if (x_end - (src + (kh_ - 1) * step) >= blocks * kCopyBlock) {
        for (int64_t ky = 0; ky < kh_; ++ky, dst += run, src += step) copy_blocks(dst, src, blocks);
        return;
      }
    }
    for (int64_t ky = 0; ky < kh_; ++ky, dst += run) {
      const int64_t iy = iy0 + ky * dh_;
      if (iy < 0 || iy >= h_) {
        std::memset(dst, x_zp, static_cast<size_t>(run));
        continue;
      }
      const int8_t* src = x + (b * h_ + iy) * w_ * c_ + c0;
      if (row_run) {
        copy_run(dst, src + ix0 * c_, run, x_end);
        continue;
      }
      for (int64_t kx = 0; kx < kw_; ++kx) {
        const int64_t ix = ix0 + kx * dw_;
        if (ix < 0 || ix >= w_)
          std::memset(dst + kx * cg_, x_zp, static_cast<size_t>(cg_));
        else
          copy_run(dst + kx * cg_, src + ix * c_, cg_, x_end);
      }
    }
  }

  bool direct_ = false;
  // The in-place plan (plan_in_place): work pieces, each of one image b. kInside: output row y0,
  // columns [x0, x1) read in place; kPixels: flattened pixels [y0, y1) gathered; kColumn: column
  // x0, rows [y0, y1) gathered; kRange (1x1 convs on x's rows): flattened pixels [y0, y1) of the
  // whole batch read in place.
  struct Piece {
    enum Kind { kInside, kPixels, kColumn, kRange } kind;
    int64_t b, y0, y1, x0, x1;
  };
  std::vector<Piece> pieces_;
  std::vector<int64_t> step_off_;
  WeightVector<int8_t> packed_;  // group blocks of group_bytes_
  bool symmetric_ = false;  // every w_zp is 0: the GEMM skips the w_zp · row-sum term
  std::vector<int32_t> b_sum_, b_zp_;
};

class Conv2dS8 : public NativeOp, ConvS8Core {
 public:
  // bias, mult, left, right: oc int32 each (bias may be absent); x_zp, y_zp, lo, hi int8 values.
  Conv2dS8(const py::array& weight, const py::array& w_zp, std::optional<py::array> bias, const py::array& mult,
           const py::array& left, const py::array& right, int64_t group, int64_t sh, int64_t sw, int64_t dh,
           int64_t dw, int64_t pt, int64_t pl, int64_t x_zp, int64_t y_zp, int64_t lo, int64_t hi,
           const std::vector<int64_t>& x_shape, const std::vector<int64_t>& y_shape)
      : ConvS8Core(weight, w_zp, group, sh, sw, dh, dw, pt, pl, x_shape, y_shape), x_zp_(int8_param(x_zp, "x_zp")),
        y_zp_(int8_param(y_zp, "y_zp")), lo_(int8_param(lo, "lo")), hi_(int8_param(hi, "hi")) {
    if (lo_ > hi_) throw ArgError("lo must be <= hi");
    bias_ = bias ? per_group<int32_t>(*bias, "bias")
                 : std::vector<int32_t>(static_cast<size_t>(group * cols_), 0);
    mult_ = per_group<int32_t>(mult, "mult");
    left_ = per_group<int32_t>(left, "left");
    right_ = per_group<int32_t>(right, "right");
    for (size_t j = 0; j < left_.size(); ++j) check_requant(mult_[j], left_[j], right_[j], "requantization");
    set_operands({{x_shape, 'b'}}, {{y_shape, 'b'}});
  }

  void run(const void* const* in, void* const* out) const override {
    Epilogue e{x_zp_, bias_.data(), mult_.data(), left_.data(), right_.data(), y_zp_, lo_, hi_};
    e.y8 = static_cast<int8_t*>(out[0]);
    run_tiles(static_cast<const int8_t*>(in[0]), e);
  }

  const char* name() const override { return in_place() ? "conv2d_s8_in_place" : "conv2d_s8"; }

 private:
  int32_t x_zp_, y_zp_, lo_, hi_;
  std::vector<int32_t> bias_, mult_, left_, right_;  // per_group's layout
};

// A Conv2D on dynamically quantized input: ONNX's DynamicQuantizeLinear + ConvInteger as the
// converter lowers them, fused at plan time (msv0.dynamic_quant). Inputs: xq, float32 integers
// in [0, 255], NHWC; zp, one float32 integer in [0, 255]; scale, 1 or oc float32; with
// run_bias, an int32 bias of oc values computed at run time. y = clamp(float(Σ (xq − zp)(w − w_zp)
// + run_bias) · scale (+ bias), lo, hi), float32, padding taps counting as zp.
class Conv2dS8Dynamic : public NativeOp, ConvS8Core {
 public:
  Conv2dS8Dynamic(const py::array& weight, const py::array& w_zp, std::optional<py::array> bias, int64_t group,
                  int64_t sh, int64_t sw, int64_t dh, int64_t dw, int64_t pt, int64_t pl,
                  const std::vector<int64_t>& x_shape, const std::vector<int64_t>& zp_shape,
                  const std::vector<int64_t>& scale_shape, const std::optional<std::vector<int64_t>>& run_bias_shape,
                  const std::vector<int64_t>& y_shape, float lo, float hi)
      : ConvS8Core(weight, w_zp, group, sh, sw, dh, dw, pt, pl, x_shape, y_shape), lo_(lo), hi_(hi) {
    if (elements(checked_shape(zp_shape, zp_shape.size(), "zp_shape")) != 1)
      throw ArgError("zp_shape: expected one value");
    scales_ = elements(checked_shape(scale_shape, scale_shape.size(), "scale_shape"));
    if (scales_ != 1 && scales_ != oc_) throw ArgError("scale_shape: expected 1 or " + std::to_string(oc_) + " values");
    if (bias) fbias_ = per_group<float>(*bias, "bias");
    std::vector<Operand> ins{{x_shape, 'f'}, {zp_shape, 'f'}, {scale_shape, 'f'}};
    if (run_bias_shape) {
      if (elements(checked_shape(*run_bias_shape, run_bias_shape->size(), "run_bias_shape")) != oc_)
        throw ArgError("run_bias_shape: expected " + std::to_string(oc_) + " values");
      ins.push_back({*run_bias_shape, 'i'});
    }
    set_operands(std::move(ins), {{y_shape, 'f'}});
  }

  void run(const void* const* in, void* const* out) const override {
    // xq and zp are integers in [0, 255]: the matcher checks that their steps make them so.
    const int64_t size = n_ * h_ * w_ * c_;
    std::unique_ptr<int8_t[]> x(new int8_t[static_cast<size_t>(size)]);
    const int8_t x_zp = codes_to_s8(in[0], size, in[1], x.get());
    const auto* s = static_cast<const float*>(in[2]);
    std::vector<float> scale(static_cast<size_t>(group_ * cols_), 0.f);
    std::vector<int32_t> bias(scale.size(), 0);
    for (int64_t g = 0; g < group_; ++g)
      for (int64_t j = 0; j < og_; ++j) {
        const int64_t o = g * og_ + j;
        scale[g * cols_ + j] = s[scales_ == 1 ? 0 : o];
        if (inputs().size() > 3) bias[g * cols_ + j] = static_cast<const int32_t*>(in[3])[o];
      }
    Epilogue e{x_zp, bias.data()};
    e.yf = static_cast<float*>(out[0]);
    e.scale = scale.data();
    e.fbias = fbias_.empty() ? nullptr : fbias_.data();
    e.yf_lo = lo_, e.yf_hi = hi_;
    run_tiles(x.get(), e);
  }

  const char* name() const override { return "conv2d_s8_dynamic"; }

 private:
  float lo_, hi_;
  int64_t scales_ = 1;
  std::vector<float> fbias_;  // per_group's layout, or empty
};

}  // namespace

MSV0_BIND(m) {
  py::class_<Conv2dS8, NativeOp, std::shared_ptr<Conv2dS8>>(
      m, "Conv2dS8",
      "int8 Conv2D, NHWC, r1.1 arithmetic: acc = Σ (x − x_zp)(w − w_zp[o]) + bias[o] over the window (padding\n"
      "taps as x_zp), y = clamp(RDBPOT(SRDHM(acc · 2^left[o], mult[o]), right[o]) + y_zp, lo, hi); weight\n"
      "[oc, kh, kw, c/group] packed once; pt/pl: the leading pads; x_shape/y_shape NHWC.")
      .def(py::init<const py::array&, const py::array&, std::optional<py::array>, const py::array&,
                    const py::array&, const py::array&, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                    int64_t, int64_t, int64_t, int64_t, int64_t, const std::vector<int64_t>&,
                    const std::vector<int64_t>&>(),
           py::arg("weight"), py::arg("w_zp"), py::arg("bias"), py::arg("mult"), py::arg("left"), py::arg("right"),
           py::arg("group"), py::arg("sh"), py::arg("sw"), py::arg("dh"), py::arg("dw"), py::arg("pt"),
           py::arg("pl"), py::arg("x_zp"), py::arg("y_zp"), py::arg("lo"), py::arg("hi"), py::arg("x_shape"),
           py::arg("y_shape"));
  py::class_<Conv2dS8Dynamic, NativeOp, std::shared_ptr<Conv2dS8Dynamic>>(
      m, "Conv2dS8Dynamic",
      "Conv2D, NHWC, on dynamically quantized x: inputs xq (float32 integers in [0, 255]), zp (one float32 integer\n"
      "in [0, 255]), scale (1 or oc float32) and, with run_bias_shape, an int32 bias of oc values;\n"
      "y = clamp(float(Σ (xq − zp)(w − w_zp[o]) + run_bias[o]) · scale[o] (+ bias[o]), lo, hi), float32, padding\n"
      "taps as zp, rounded after the product and after the sum. weight [oc, kh, kw, c/group] int8 packed once;\n"
      "w_zp oc int32.")
      .def(py::init<const py::array&, const py::array&, std::optional<py::array>, int64_t, int64_t, int64_t, int64_t,
                    int64_t, int64_t, int64_t, const std::vector<int64_t>&, const std::vector<int64_t>&,
                    const std::vector<int64_t>&, const std::optional<std::vector<int64_t>>&,
                    const std::vector<int64_t>&, float, float>(),
           py::arg("weight"), py::arg("w_zp"), py::arg("bias"), py::arg("group"), py::arg("sh"), py::arg("sw"),
           py::arg("dh"), py::arg("dw"), py::arg("pt"), py::arg("pl"), py::arg("x_shape"), py::arg("zp_shape"),
           py::arg("scale_shape"), py::arg("run_bias_shape"), py::arg("y_shape"), py::arg("lo") = -INFINITY,
           py::arg("hi") = INFINITY);
}

}  // namespace msv0
#endif
