// Depthwise 2-D convolution, NHWC int8, r1.1's generic int8 kernel (format-v0.md §3.1):
//   acc[c] = bias[c] + Σ_{in-bounds taps} (x − x_zp) · (w[c] − w_zp[c])     (int32, wrapping)
//   y[c]   = clamp(RDBPOT(SRDHM(acc · 2^left[c], mult[c]), right[c]) + y_zp, lo, hi)
// r1.1 clips the tap rows with dilateH but reads row oy·sh − pt + ky·rd with rd = dilateW (its
// quirk); rd is a parameter here, and construction rejects geometry where that row leaves the
// image (r1.1 would read outside the input). Vectorised along C in int32 lanes; weights
// (shifted by their zero points), bias and requantization constants are packed once as
// [taps][cp] and [cp] int32, cp = C rounded up to 16 (every tier's lane count divides it), so
// they load as whole vectors; x and y use tails and are never over-read or over-written.
#include "kernels/kernel.h"

namespace msv0 {

struct DwS8Args {
  const int8_t* x;        // n x h x w x c
  int8_t* y;              // n x oh x ow x c
  const int8_t* zp_row;   // w x c values x_zp
  const int32_t* weight;  // kh*kw x cp: w − w_zp
  const int32_t* bias;    // cp each, zero-padded
  const int32_t* folded_bias;  // bias − x_zp · Σ_taps w' (see interior())
  const int32_t* mult;
  const int32_t* left;
  const int32_t* right;
  int64_t n, h, w, c, oh, ow, cp;
  int64_t kh, kw, sh, sw, dh, dw, rd, pt, pl;  // rd: the row step of the taps (see above)
  int32_t x_zp, y_zp, lo, hi;
};

// Output rows [r0, r1) of the flattened (b, oy) range.
using DwS8Fn = void (*)(const DwS8Args&, int64_t r0, int64_t r1);
MSV0_DECLARE(dwconv2d_s8, DwS8Fn)

constexpr int64_t kDwS8Cr = 16;

// Taps [first, last) of a window starting at `start` with step d that land inside [0, size):
// r1.1's UP_DIV bounds. Static: each ISA pass keeps its own copy.
static int64_t dw_s8_first_tap(int64_t start, int64_t d) { return start >= 0 ? 0 : (-start + d - 1) / d; }
static int64_t dw_s8_last_tap(int64_t start, int64_t d, int64_t size, int64_t k) {
  return start >= size ? 0 : (k < (size - 1 - start) / d + 1 ? k : (size - 1 - start) / d + 1);
}

}  // namespace msv0

#if !MSV0_ONCE
namespace msv0 {
namespace MSV0_ISA {
namespace {

// The requantization of channels [c, c + kLanes).
Requant requant_at(const DwS8Args& a, int64_t c) {
  return {VecI32::load(a.mult + c), VecI32::load(a.left + c), VecI32::load(a.right + c), VecI32::splat(a.y_zp),
          VecI32::splat(a.lo), VecI32::splat(a.hi)};
}

// Any pixel: taps [ky0, ky1) x [kx0, kx1) of the window whose top-left input cell is (iy0, ix0),
// channels [c, c + lanes).
template <bool Tail>
void pixel(const DwS8Args& a, const int8_t* xb, int64_t iy0, int64_t ky0, int64_t ky1, int64_t ix0, int64_t kx0,
           int64_t kx1, int8_t* out, int64_t c, int64_t lanes) {
  const VecI32 x_zp = VecI32::splat(a.x_zp);
  VecI32 acc = VecI32::load(a.bias + c);
  for (int64_t ky = ky0; ky < ky1; ++ky) {
    const int8_t* xr = xb + ((iy0 + ky * a.rd) * a.w + ix0) * a.c + c;
    const int32_t* wr = a.weight + ky * a.kw * a.cp + c;
    for (int64_t kx = kx0; kx < kx1; ++kx)
      acc = acc + (load_s8_n<Tail>(xr + kx * a.dw * a.c, lanes) - x_zp) * VecI32::load(wr + kx * a.cp);
  }
  store_s8_n<Tail>(requant_at(a, c)(acc), out + c, lanes);
}

// bias + Σ tap(kx, ky) · w[ky·K + kx] over a K x K window, as one sum per tap row added at the
// end: K chains of K dependent multiply-adds rather than one of K * K (a pixel's chain was
// latency-bound: 8 % off MobileNetV2's stride-1 layers on Zen 4). int32 sums: the order is free.
template <int K, class Tap>
VecI32 window_sum(VecI32 bias, const VecI32 (&w)[K * K], Tap tap) {
  VecI32 rows_acc[K];
#pragma GCC unroll 8
  for (int ky = 0; ky < K; ++ky) {
    rows_acc[ky] = ky == 0 ? bias : VecI32::zero();
#pragma GCC unroll 8
    for (int kx = 0; kx < K; ++kx) rows_acc[ky] = mul_add16(rows_acc[ky], tap(kx, ky), w[ky * K + kx]);
  }
#pragma GCC unroll 8
  for (int ky = 1; ky < K; ++ky) rows_acc[0] = rows_acc[0] + rows_acc[ky];
  return rows_acc[0];
}

// K x K windows: one output row's pixels, channels [c, c + lanes), the K*K weight vectors in
// registers. rows[ky] is the input row of tap row ky, or a row of x_zp where r1.1 skips the tap,
// and taps left or right of the image read x_zp too: every tap reads and adds x·w', and the
// folded bias (bias − x_zp·Σw', wrapping like the sum) takes the zero point off. Pixels
// [ox_lo, ox_hi) have all their columns inside the image and test none.
template <int K, bool Tail>
void row_block(const DwS8Args& a, const int8_t* const* rows, int8_t* yrow, int64_t c, int64_t lanes, int64_t ox_lo,
               int64_t ox_hi) {
  VecI32 w[K * K];  // w − w_zp fits int16, and so does every x
  for (int i = 0; i < K * K; ++i) w[i] = as_mul16_weight(VecI32::load(a.weight + i * a.cp + c));
  const VecI32 bias = VecI32::load(a.folded_bias + c);
  const Requant q = requant_at(a, c);
  // Locals: the int8 stores may alias anything, so fields of `a` and rows[] would be reloaded
  // per pixel.
  const int64_t ch = a.c, w_in = a.w, dw = a.dw, sw = a.sw, pl = a.pl;
  const int8_t* const zp = a.zp_row + c;
  const int8_t* row[K];
  for (int ky = 0; ky < K; ++ky) row[ky] = rows[ky] + c;
  auto border = [&](int64_t ox) {
    VecI32 acc = bias;
    for (int kx = 0; kx < K; ++kx) {
      const int64_t ix = ox * sw - pl + kx * dw;
      const bool inside = ix >= 0 && ix < w_in;
      for (int ky = 0; ky < K; ++ky)
        acc = mul_add16(acc, load_s8_n<Tail>(inside ? row[ky] + ix * ch : zp, lanes), w[ky * K + kx]);
    }
    store_s8_n<Tail>(q(acc), yrow + ox * ch + c, lanes);
  };
  // Pixels whose whole window lies left or right of the image ([0, out_lo) and [out_hi, ow))
  // read only x_zp: one value, made once (a fuzzed model padded a row by 15.6M columns).
  const int64_t out_lo = min_i(ox_lo, max_i(0, (pl - (K - 1) * dw + sw - 1) / sw));
  const int64_t out_hi = max_i(ox_hi, min_i(a.ow, (w_in + pl + sw - 1) / sw));
  const auto fill = [&](int64_t o0, int64_t o1) {
    if (o0 >= o1) return;
    VecI32 acc = bias;
    for (int i = 0; i < K * K; ++i) acc = mul_add16(acc, load_s8_n<Tail>(zp, lanes), w[i]);
    const VecI32 y = q(acc);
    for (int64_t o = o0; o < o1; ++o) store_s8_n<Tail>(y, yrow + o * ch + c, lanes);
  };
  fill(0, out_lo);
  for (int64_t ox = out_lo; ox < ox_lo; ++ox) border(ox);
  int64_t ox = ox_lo;
  // Stride 1: the window slides one pixel, so each step loads only its new column and keeps the
  // other K - 1 (the loads were most of the vector work per output; 17 % off MobileNetV2's 3x3
  // layers, 25 % off 5x5 ones on AVX-512). int32 sums: the order is free. AVX2's 16 registers
  // spill a 5x5 window's 25 columns beside its 25 weights, which made it slower there.
  constexpr bool kSlide = K <= 3 || VecI32::kLanes != 8;
  if (kSlide && sw == 1 && dw == 1 && ox < ox_hi) {
    VecI32 cols[K][K];  // [kx][ky]
    const int64_t first = (ox - pl) * ch;
#pragma GCC unroll 8
    for (int kx = 0; kx < K - 1; ++kx)
#pragma GCC unroll 8
      for (int ky = 0; ky < K; ++ky) cols[kx][ky] = load_s8_n<Tail>(row[ky] + first + kx * ch, lanes);
    for (; ox < ox_hi; ++ox) {
      const int64_t next = (ox - pl + K - 1) * ch;
#pragma GCC unroll 8
      for (int ky = 0; ky < K; ++ky) cols[K - 1][ky] = load_s8_n<Tail>(row[ky] + next, lanes);
      const VecI32 acc = window_sum<K>(bias, w, [&](int kx, int ky) { return cols[kx][ky]; });
      store_s8_n<Tail>(q(acc), yrow + ox * ch + c, lanes);
#pragma GCC unroll 8
      for (int kx = 0; kx < K - 1; ++kx)
#pragma GCC unroll 8
        for (int ky = 0; ky < K; ++ky) cols[kx][ky] = cols[kx + 1][ky];
    }
  }
  for (; ox < ox_hi; ++ox) {
    const int64_t off = (ox * sw - pl) * ch;
    const VecI32 acc =
        window_sum<K>(bias, w, [&](int kx, int ky) { return load_s8_n<Tail>(row[ky] + off + kx * dw * ch, lanes); });
    store_s8_n<Tail>(q(acc), yrow + ox * ch + c, lanes);
  }
  for (int64_t ox = ox_hi; ox < out_hi; ++ox) border(ox);
  fill(out_hi, a.ow);
}

template <int K>
void rows_square(const DwS8Args& a, int64_t r0, int64_t r1) {
  // Columns whose whole window lies inside the image.
  const int64_t ox_lo = min_i((a.pl + a.sw - 1) / a.sw, a.ow);
  const int64_t span = a.w - 1 - (K - 1) * a.dw + a.pl;
  const int64_t ox_hi = max_i(ox_lo, min_i(span >= 0 ? span / a.sw + 1 : 0, a.ow));
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t b = r / a.oh, oy = r % a.oh;
    const int64_t iy0 = oy * a.sh - a.pt;
    const int64_t ky0 = dw_s8_first_tap(iy0, a.dh), ky1 = dw_s8_last_tap(iy0, a.dh, a.h, K);
    const int8_t* xb = a.x + b * a.h * a.w * a.c;
    const int8_t* rows[K];
    for (int ky = 0; ky < K; ++ky) rows[ky] = ky >= ky0 && ky < ky1 ? xb + (iy0 + ky * a.rd) * a.w * a.c : a.zp_row;
    int8_t* yrow = a.y + r * a.ow * a.c;
    int64_t c = 0;
    for (; c + VecI32::kLanes <= a.c; c += VecI32::kLanes)
      row_block<K, false>(a, rows, yrow, c, VecI32::kLanes, ox_lo, ox_hi);
    if (c < a.c) row_block<K, true>(a, rows, yrow, c, a.c - c, ox_lo, ox_hi);
  }
}

void rows_general(const DwS8Args& a, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t b = r / a.oh, oy = r % a.oh;
    const int64_t iy0 = oy * a.sh - a.pt;
    const int64_t ky0 = dw_s8_first_tap(iy0, a.dh), ky1 = dw_s8_last_tap(iy0, a.dh, a.h, a.kh);
    const int8_t* xb = a.x + b * a.h * a.w * a.c;
    for (int64_t ox = 0; ox < a.ow; ++ox) {
      const int64_t ix0 = ox * a.sw - a.pl;
      const int64_t kx0 = dw_s8_first_tap(ix0, a.dw), kx1 = dw_s8_last_tap(ix0, a.dw, a.w, a.kw);
      int8_t* out = a.y + (r * a.ow + ox) * a.c;
      int64_t c = 0;
      for (; c + VecI32::kLanes <= a.c; c += VecI32::kLanes)
        pixel<false>(a, xb, iy0, ky0, ky1, ix0, kx0, kx1, out, c, VecI32::kLanes);
      if (c < a.c) pixel<true>(a, xb, iy0, ky0, ky1, ix0, kx0, kx1, out, c, a.c - c);
    }
  }
}

}  // namespace

void dwconv2d_s8(const DwS8Args& a, int64_t r0, int64_t r1) {
  if (a.kh == 3 && a.kw == 3) return rows_square<3>(a, r0, r1);
  if (a.kh == 5 && a.kw == 5) return rows_square<5>(a, r0, r1);
  rows_general(a, r0, r1);
}

MSV0_EXPORT(dwconv2d_s8)
}  // namespace MSV0_ISA
}  // namespace msv0

#else  // binding pass
#include <optional>
#include <string>
#include <vector>
#include <pybind11/stl.h>

#include "runtime/native.h"

namespace msv0 {
namespace {

// An int8 depthwise conv with its weights packed (see the file comment), on x of a fixed shape.
class DwConv2dS8 : public NativeOp {
 public:
  DwConv2dS8(const py::array& weight, const py::array& w_zp, std::optional<py::array> bias, const py::array& mult,
             const py::array& left, const py::array& right, int64_t x_zp, int64_t y_zp, int64_t lo, int64_t hi,
             int64_t sh, int64_t sw, int64_t dh, int64_t dw, int64_t rd, int64_t pt, int64_t pl,
             const std::vector<int64_t>& x_shape, const std::vector<int64_t>& y_shape)
      : fn_(MSV0_DISPATCH(dwconv2d_s8)) {
    if (weight.ndim() != 3) throw ArgError("weight: expected [c, kh, kw]");
    const int8_t* pw = in_ptr<int8_t>(weight, "weight");
    const int64_t c = weight.shape(0), kh = weight.shape(1), kw = weight.shape(2);
    if (kh < 1 || kw < 1) throw ArgError("weight: empty window");
    // Vectors over channels: under 4 they fill a vector's lanes so thinly that the one-lane
    // scalar kernel is faster (1 channel: 10 against 37 ns a pixel on AVX2).
    if (c < 4) fn_ = dwconv2d_s8_slots().entry[0];
    check_strides(sh, sw, dh, dw);
    check_strides(1, 1, rd, 1);
    check_pads(pt, pl);
    const auto& x = checked_shape(x_shape, 4, "x_shape");
    const auto& y = checked_shape(y_shape, 4, "y_shape");
    if (x[3] != c || y[0] != x[0] || y[3] != c) throw ArgError("x_shape, y_shape: batch and channels must match");
    a_ = DwS8Args{nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, x[0], x[1], x[2], c,
                  y[1], y[2],
                  (c + kDwS8Cr - 1) / kDwS8Cr * kDwS8Cr, kh, kw, sh, sw, dh, dw, rd, pt, pl,
                  int8_param(x_zp, "x_zp"), int8_param(y_zp, "y_zp"), int8_param(lo, "lo"), int8_param(hi, "hi")};
    if (a_.lo > a_.hi) throw ArgError("lo must be <= hi");
    // The rows r1.1's bounds admit must lie in the image: with rd != dh they may not.
    for (int64_t oy = 0; rd != dh && oy < a_.oh; ++oy) {
      const int64_t iy0 = oy * sh - pt;
      const int64_t ky0 = dw_s8_first_tap(iy0, dh), ky1 = dw_s8_last_tap(iy0, dh, a_.h, kh);
      if (ky0 < ky1 && (iy0 + ky0 * rd < 0 || iy0 + (ky1 - 1) * rd >= a_.h))
        throw ArgError("output row " + std::to_string(oy) + " reads input row " +
                       std::to_string(iy0 + (iy0 + ky0 * rd < 0 ? ky0 : ky1 - 1) * rd) +
                       ", outside the input (r1.1 steps rows by dilateW but bounds them by dilateH)");
    }
    const std::vector<int32_t> zp = padded_int32(w_zp, c, a_.cp, "w_zp");
    w_.assign(static_cast<size_t>(kh * kw * a_.cp), 0);
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t t = 0; t < kh * kw; ++t)
        w_[static_cast<size_t>(t * a_.cp + ch)] = pw[ch * kh * kw + t] - int8_param(zp[ch], "w_zp");
    bias_ = bias ? padded_int32(*bias, c, a_.cp, "bias") : std::vector<int32_t>(a_.cp, 0);
    folded_bias_ = bias_;
    for (int64_t ch = 0; ch < c; ++ch) {
      uint32_t sum = 0;  // wraps like r1.1's int32 accumulator
      for (int64_t t = 0; t < kh * kw; ++t) sum += static_cast<uint32_t>(w_[static_cast<size_t>(t * a_.cp + ch)]);
      folded_bias_[ch] = static_cast<int32_t>(static_cast<uint32_t>(bias_[ch]) -
                                              static_cast<uint32_t>(a_.x_zp) * sum);
    }
    zp_row_.assign(static_cast<size_t>(a_.w * c), static_cast<int8_t>(a_.x_zp));
    mult_ = padded_int32(mult, c, a_.cp, "mult");
    left_ = padded_int32(left, c, a_.cp, "left");
    right_ = padded_int32(right, c, a_.cp, "right");
    for (int64_t ch = 0; ch < c; ++ch) check_requant(mult_[ch], left_[ch], right_[ch], "requantization");
    a_.weight = w_.data();
    a_.bias = bias_.data();
    a_.folded_bias = folded_bias_.data();
    a_.zp_row = zp_row_.data();
    a_.mult = mult_.data();
    a_.left = left_.data();
    a_.right = right_.data();
    set_operands({{x, 'b'}}, {{y, 'b'}});
  }

  void run(const void* const* in, void* const* out) const override {
    DwS8Args a = a_;
    a.x = static_cast<const int8_t*>(in[0]);
    a.y = static_cast<int8_t*>(out[0]);
    parallel_for(a.n * a.oh, 1, [&](int64_t r0, int64_t r1) { fn_(a, r0, r1); });
  }
  const char* name() const override { return "dwconv2d_s8"; }

 private:
  DwS8Fn fn_;
  DwS8Args a_;
  std::vector<int32_t> w_, bias_, folded_bias_, mult_, left_, right_;
  std::vector<int8_t> zp_row_;
};

}  // namespace

MSV0_BIND(m) {
  py::class_<DwConv2dS8, NativeOp, std::shared_ptr<DwConv2dS8>>(
      m, "DwConv2dS8",
      "int8 depthwise conv, r1.1 arithmetic, NHWC: weight [c, kh, kw] int8 with per-channel w_zp, int32 bias,\n"
      "per-channel mult/left/right; taps clipped with dilation dh but rows stepped by rd (r1.1's dilateW).")
      .def(py::init<const py::array&, const py::array&, std::optional<py::array>, const py::array&, const py::array&,
                    const py::array&, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                    int64_t, int64_t, const std::vector<int64_t>&, const std::vector<int64_t>&>(),
           py::arg("weight"), py::arg("w_zp"), py::arg("bias"), py::arg("mult"), py::arg("left"), py::arg("right"),
           py::arg("x_zp"), py::arg("y_zp"), py::arg("lo"), py::arg("hi"), py::arg("sh"), py::arg("sw"),
           py::arg("dh"), py::arg("dw"), py::arg("rd"), py::arg("pt"), py::arg("pl"), py::arg("x_shape"),
           py::arg("y_shape"));
}

}  // namespace msv0
#endif
