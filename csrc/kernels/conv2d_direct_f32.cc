// Direct Conv2D for few input channels (network stems such as 224x224x3 -> 32/64), NHWC float32:
//   y[b,oy,ox,o] = clamp(bias[o] + sum_{ky,kx,ci} x[b, oy*sh-pt+ky*dh, ox*sw-pl+kx*dw, ci] * w[o,ky,kx,ci])
// With 1-4 input channels an im2col row is a short strided gather and the GEMM's K is tiny, so
// both the copy and the GEMM's per-panel overhead dominate. Here the sums run straight from x,
// vectorised over OUTPUT channels: the weight is packed once per Session as
// [kh][kw][c][cp], cp = Cout rounded up to the tier's lane count and zero-padded, so each tap's weight is whole
// vectors. A block of P pixels of one output row keeps P x V accumulators in registers; each
// tap loads V weight vectors once and broadcasts one x value per pixel. Taps outside the image
// are skipped (zero padding); y's Cout tail uses masked stores, so nothing past y is written.
#include "kernels/kernel.h"

namespace msv0 {

struct DirectConvArgs {
  const float* x;       // n x h x w x c
  float* y;             // n x oh x ow x oc
  const float* weight;  // kh x kw x c x cp
  const float* bias;    // cp (zeros when the node has none)
  int64_t n, h, w, c, oh, ow, oc, cp;
  int64_t kh, kw, sh, sw, dh, dw, pt, pl;
  float lo, hi;
};

// Output rows [r0, r1) of the flattened (b, oy) range.
using DirectConvFn = void (*)(const DirectConvArgs&, int64_t r0, int64_t r1);
// A tier's slot: the kernel and the output-channel tile (its lane count) that packing pads to.
struct DirectConvConfig {
  DirectConvFn fn;
  int64_t cr;
};
MSV0_DECLARE(conv2d_direct_f32, DirectConvConfig)

}  // namespace msv0

#if !MSV0_ONCE
namespace msv0 {
namespace MSV0_ISA {
namespace {

// Vector registers of the tier: AVX2 (8 lanes) has 16, AVX-512 (16 lanes) and NEON (4 lanes)
// have 32; the scalar tier assumes x86's 16. Accumulators, V weight vectors and one broadcast must fit.
constexpr int kRegs = VecF::kLanes == 16 || VecF::kLanes == 4 ? 32 : 16;
constexpr int kMaxV = kRegs == 32 ? 4 : 2;
constexpr int pixels_for(int v) { return (kRegs - 1 - v) / v < 8 ? (kRegs - 1 - v) / v : 8; }

// Taps [first, last) of a window starting at `start` with step d that land inside [0, size).
int64_t first_tap(int64_t start, int64_t d) { return start >= 0 ? 0 : (-start + d - 1) / d; }
int64_t last_tap(int64_t start, int64_t d, int64_t size, int64_t k) {
  return start >= size ? 0 : min_i(k, (size - 1 - start) / d + 1);
}

// Stores V vectors of output channels [o0, o0 + V*lanes), clipped to oc.
// The loops over accumulators unroll completely, so that they stay registers: indexed by a loop
// clang does not unroll, they live on the stack, stored at every tap.
template <int V>
void store_out(const VecF* acc, float* out, int64_t o0, int64_t oc, VecF lo, VecF hi) {
#pragma GCC unroll 8
  for (int v = 0; v < V; ++v) {
    const int64_t o = o0 + v * VecF::kLanes;
    const VecF r = clamp(acc[v], lo, hi);
    if (o + VecF::kLanes <= oc)
      r.store(out + o);
    else if (o < oc)
      r.store_tail(out + o, oc - o);
  }
}

// P interior columns [ox, ox + P) at once: every kx tap is inside the image, so no per-tap
// tests; each tap's V weight vectors are loaded once for all P columns.
template <int V, int P>
void interior_block(const DirectConvArgs& a, const float* xb, const float* wb, const VecF* bias, int64_t iy0,
                    int64_t ky0, int64_t ky1, float* yrow, int64_t o0, int64_t ox) {
  constexpr int L = VecF::kLanes;
  const int64_t c = a.c, cp = a.cp, xstep = a.sw * c, kxstep = a.dw * c;
  VecF acc[P][V];
  for (int p = 0; p < P; ++p)
    for (int v = 0; v < V; ++v) acc[p][v] = bias[v];
  for (int64_t ky = ky0; ky < ky1; ++ky) {
    const float* xr = xb + ((iy0 + ky * a.dh) * a.w + ox * a.sw - a.pl) * c;
    const float* wp = wb + ky * a.kw * c * cp;
    for (int64_t kx = 0; kx < a.kw; ++kx, xr += kxstep)
      for (int64_t ci = 0; ci < c; ++ci, wp += cp) {
        VecF wv[V];
        for (int v = 0; v < V; ++v) wv[v] = VecF::load(wp + v * L);
        for (int p = 0; p < P; ++p) {
          const VecF xv = VecF::splat(xr[p * xstep + ci]);
          for (int v = 0; v < V; ++v) acc[p][v] = fmadd(xv, wv[v], acc[p][v]);
        }
      }
  }
  // The clamp bounds are made here, not passed in: with 4 x 6 accumulators, two more live
  // registers through the loop make the compiler spill a weight vector.
  const VecF lo = VecF::splat(a.lo), hi = VecF::splat(a.hi);
#pragma GCC unroll 16
  for (int p = 0; p < P; ++p) store_out<V>(acc[p], yrow + (ox + p) * a.oc, o0, a.oc, lo, hi);
}

// One row of outputs, channels [o0, o0 + V*lanes). iy0/ky0/ky1: the row's window start and its
// taps inside the image; [ox_lo, ox_hi): the columns whose every kx tap is inside the image.
template <int V>
void row_block(const DirectConvArgs& a, int64_t b, int64_t iy0, int64_t ky0, int64_t ky1, float* yrow,
               int64_t o0, int64_t ox_lo, int64_t ox_hi) {
  constexpr int P = pixels_for(V);
  constexpr int L = VecF::kLanes;
  const int64_t c = a.c, cp = a.cp;
  const float* xb = a.x + b * a.h * a.w * c;
  const float* wb = a.weight + o0;
  const VecF lo = VecF::splat(a.lo), hi = VecF::splat(a.hi);
  VecF bias[V];
  for (int v = 0; v < V; ++v) bias[v] = VecF::load(a.bias + o0 + v * L);

  // Any column: kx taps clipped to the image.
  auto pixel = [&](int64_t ox) {
    VecF acc[V];
    for (int v = 0; v < V; ++v) acc[v] = bias[v];
    const int64_t ix0 = ox * a.sw - a.pl;
    const int64_t kx0 = first_tap(ix0, a.dw), kx1 = last_tap(ix0, a.dw, a.w, a.kw);
    for (int64_t ky = ky0; ky < ky1; ++ky) {
      const float* xr = xb + ((iy0 + ky * a.dh) * a.w + ix0) * c;
      for (int64_t kx = kx0; kx < kx1; ++kx) {
        const float* xp = xr + kx * a.dw * c;
        const float* wp = wb + (ky * a.kw + kx) * c * cp;
        for (int64_t ci = 0; ci < c; ++ci, wp += cp) {
          const VecF xv = VecF::splat(xp[ci]);
          for (int v = 0; v < V; ++v) acc[v] = fmadd(xv, VecF::load(wp + v * L), acc[v]);
        }
      }
    }
    store_out<V>(acc, yrow + ox * a.oc, o0, a.oc, lo, hi);
  };

  int64_t ox = 0;
  for (; ox < ox_lo; ++ox) pixel(ox);
  for (; ox + P <= ox_hi; ox += P) interior_block<V, P>(a, xb, wb, bias, iy0, ky0, ky1, yrow, o0, ox);
  // The interior's last few columns: one more block ending at ox_hi, recomputing (the same
  // values) some columns already written, beats a slow single-column pass over each.
  if (ox < ox_hi && ox_hi - ox_lo >= P) {
    interior_block<V, P>(a, xb, wb, bias, iy0, ky0, ky1, yrow, o0, ox_hi - P);
    ox = ox_hi;
  }
  for (; ox < a.ow; ++ox) pixel(ox);
}

template <int V>
void row_chunk(const DirectConvArgs& a, int64_t b, int64_t iy0, int64_t ky0, int64_t ky1, float* yrow,
               int64_t o0, int64_t nv, int64_t ox_lo, int64_t ox_hi) {
  if (nv == V) return row_block<V>(a, b, iy0, ky0, ky1, yrow, o0, ox_lo, ox_hi);
  if constexpr (V > 1) row_chunk<V - 1>(a, b, iy0, ky0, ky1, yrow, o0, nv, ox_lo, ox_hi);
}

}  // namespace

void conv2d_direct_f32(const DirectConvArgs& a, int64_t r0, int64_t r1) {
  // Columns whose whole window lies inside the image: ox*sw - pl >= 0 and
  // ox*sw - pl + (kw-1)*dw < w.
  const int64_t span = (a.kw - 1) * a.dw;
  const int64_t ox_lo = min_i((a.pl + a.sw - 1) / a.sw, a.ow);
  int64_t ox_hi = a.w - 1 - span + a.pl >= 0 ? (a.w - 1 - span + a.pl) / a.sw + 1 : 0;
  ox_hi = max_i(ox_lo, min_i(ox_hi, a.ow));
  const int64_t vectors = (a.oc + VecF::kLanes - 1) / VecF::kLanes;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t b = r / a.oh, oy = r % a.oh;
    const int64_t iy0 = oy * a.sh - a.pt;
    const int64_t ky0 = first_tap(iy0, a.dh), ky1 = last_tap(iy0, a.dh, a.h, a.kh);
    float* yrow = a.y + r * a.ow * a.oc;
    // Channel chunks of at most kMaxV vectors, as even as possible (64 channels on AVX2:
    // 2 + 2 + 2 + 2 vectors, not 2 + 2 + 2 + 1 + 1).
    const int64_t chunks = (vectors + kMaxV - 1) / kMaxV;
    for (int64_t k = 0, v0 = 0; k < chunks; ++k) {
      const int64_t nv = (vectors - v0) / (chunks - k);
      row_chunk<kMaxV>(a, b, iy0, ky0, ky1, yrow, v0 * VecF::kLanes, nv, ox_lo, ox_hi);
      v0 += nv;
    }
  }
}

MSV0_EXPORT_CONFIG(conv2d_direct_f32, conv2d_direct_f32, VecF::kLanes)
}  // namespace MSV0_ISA
}  // namespace msv0

#else  // binding pass
#include <vector>

#include "kernels/conv2d_f32.h"
#include "runtime/weight_memory.h"

namespace msv0 {
namespace {

// A group-1 Conv2D summed straight from x. It runs the tier it was packed for: a wider tier
// would read whole vectors past a narrower tier's padding.
class DirectConv2d : public NativeOp {
 public:
  DirectConv2d(const Conv2dShape& s, const float* weight, const float* bias) {
    const DirectConvConfig& cfg = MSV0_DISPATCH(conv2d_direct_f32);
    fn_ = cfg.fn;
    const int64_t cp = (s.oc + cfg.cr - 1) / cfg.cr * cfg.cr;
    const int64_t taps = s.kh * s.kw * s.c;  // (ky, kx, ci), the same order in both layouts
    weight_.assign(static_cast<size_t>(taps * cp), 0.f);
    for (int64_t o = 0; o < s.oc; ++o)
      for (int64_t t = 0; t < taps; ++t) weight_[static_cast<size_t>(t * cp + o)] = weight[o * taps + t];
    bias_.assign(static_cast<size_t>(cp), 0.f);
    if (bias) std::copy(bias, bias + s.oc, bias_.begin());
    a_ = DirectConvArgs{nullptr, nullptr, weight_.data(), bias_.data(), s.n, s.h, s.w, s.c, s.oh, s.ow, s.oc, cp,
                        s.kh, s.kw, s.sh, s.sw, s.dh, s.dw, s.pt, s.pl, s.lo, s.hi};
    set_operands({{{s.n, s.h, s.w, s.c}}}, {{{s.n, s.oh, s.ow, s.oc}}});
  }

  void run(const void* const* in, void* const* out) const override {
    DirectConvArgs a = a_;
    a.x = static_cast<const float*>(in[0]);
    a.y = static_cast<float*>(out[0]);
    parallel_for(a.n * a.oh, grain_for(a.ow * a.oc * a.kh * a.kw * a.c), [&](int64_t r0, int64_t r1) {
      fn_(a, r0, r1);
      post_.apply(a.y, r0 * a.ow * a.oc, r1 * a.ow * a.oc);
    });
  }
  const char* name() const override { return "direct"; }
  std::shared_ptr<NativeOp> with_post(const PostOp& post) const override {
    auto c = std::make_shared<DirectConv2d>(*this);
    c->post_ = post_.then(post);
    c->a_.weight = c->weight_.data();  // the copy's own vectors
    c->a_.bias = c->bias_.data();
    return c;
  }

 private:
  DirectConvFn fn_;
  WeightVector<float> weight_;
  std::vector<float> bias_;
  DirectConvArgs a_;
  PostOp post_;
};

}  // namespace

std::shared_ptr<NativeOp> make_direct_conv2d(const Conv2dShape& s, const float* weight, const float* bias) {
  return std::make_shared<DirectConv2d>(s, weight, bias);
}

}  // namespace msv0
#endif
