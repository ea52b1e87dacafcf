// Reduce, float32 (format-v0.md §5, r1.1's reduce_fp32.c): the axes are reduced one after another
// in list order, each pass seeing the tensor as [outer, axis, inner] and accumulating every output
// in order along the axis, as r1.1 does. With inner > 1 the vector lanes run along inner (each lane
// one output, so the order is r1.1's); with inner = 1 they run along the axis and are combined at
// the end (a horizontal sum, which regroups the additions). SumSquare and ASum square or take |x|
// on the first pass only (r1.1 transforms the input once, then sums); Mean divides after each pass.
#include "kernels/kernel.h"

namespace msv0 {

struct ReduceArgs {
  const float* x;
  float* y;
  int64_t axis, inner;
  int64_t chunks;  // pieces of inner per outer row (inner > 1), each at most kReduceChunk floats
  int32_t mode;    // r1.1's ReduceMode: Mean 0, Max 1, Min 2, Prod 3, Sum 4, SumSquare 5, ASum 6
  float coeff;     // multiplies the result (1: none)
};

// Outputs of at most this many floats are accumulated together: their row stays in L1.
constexpr int64_t kReduceChunk = 512;

// Units [u0, u1): outer rows (inner = 1) or (outer row, chunk) pairs.
using ReduceFn = void (*)(const ReduceArgs&, int64_t u0, int64_t u1);
MSV0_DECLARE(reduce_f32, ReduceFn)

}  // namespace msv0

#if !MSV0_ONCE
namespace msv0 {
namespace MSV0_ISA {
namespace {

enum Combine { kAdd, kMax, kMin, kMul };
enum Pre { kPlain, kSquare, kAbs };

// max/min return their second operand when unordered, as r1.1's `acc > x ? acc : x` does.
template <int C>
VecF combine(VecF acc, VecF x) {
  if (C == kAdd) return acc + x;
  if (C == kMax) return max(acc, x);
  if (C == kMin) return min(acc, x);
  return acc * x;
}
template <int C>
float combine(float acc, float x) {
  if (C == kAdd) return acc + x;
  if (C == kMax) return acc > x ? acc : x;
  if (C == kMin) return acc < x ? acc : x;
  return acc * x;
}

template <int P>
VecF pre(VecF x) {
  if (P == kSquare) return x * x;
  if (P == kAbs) return from_bits(bits(x) & VecI32::splat(0x7fffffff));
  return x;
}
template <int P>
float pre(float x) {
  if (P == kSquare) return x * x;
  if (P == kAbs) return std::fabs(x);
  return x;
}

// The reduction of n >= 1 contiguous floats.
template <int C, int P>
float row(const float* x, int64_t n) {
  constexpr int64_t L = VecF::kLanes;
  if (n < L) {
    float acc = pre<P>(x[0]);
    for (int64_t i = 1; i < n; ++i) acc = combine<C>(acc, pre<P>(x[i]));
    return acc;
  }
  VecF v = pre<P>(VecF::load(x));
  int64_t i = L;
  for (; i + L <= n; i += L) v = combine<C>(v, pre<P>(VecF::load(x + i)));
  float lanes[L];
  v.store(lanes);
  float acc = lanes[0];
  for (int64_t k = 1; k < L; ++k) acc = combine<C>(acc, lanes[k]);
  for (; i < n; ++i) acc = combine<C>(acc, pre<P>(x[i]));
  return acc;
}

// n outputs y[c] = x[c] ∘ x[c + inner] ∘ ... over `axis` rows, built up in y row by row.
template <int C, int P>
void columns(const float* x, float* y, int64_t axis, int64_t inner, int64_t n) {
  constexpr int64_t L = VecF::kLanes;
  int64_t c = 0;
  for (; c + L <= n; c += L) pre<P>(VecF::load(x + c)).store(y + c);
  if (c < n) pre<P>(VecF::load_tail(x + c, n - c)).store_tail(y + c, n - c);
  for (int64_t a = 1; a < axis; ++a) {
    const float* xa = x + a * inner;
    for (c = 0; c + L <= n; c += L) combine<C>(VecF::load(y + c), pre<P>(VecF::load(xa + c))).store(y + c);
    if (c < n)
      combine<C>(VecF::load_tail(y + c, n - c), pre<P>(VecF::load_tail(xa + c, n - c))).store_tail(y + c, n - c);
  }
}

// y = y / axis (Mean), then y · coeff.
void finish(float* y, int64_t n, float axis, bool mean, float coeff) {
  constexpr int64_t L = VecF::kLanes;
  const VecF d = VecF::splat(axis), k = VecF::splat(coeff);
  const auto step = [&](VecF v) {
    if (mean) v = v / d;
    if (coeff != 1.f) v = v * k;
    return v;
  };
  int64_t c = 0;
  for (; c + L <= n; c += L) step(VecF::load(y + c)).store(y + c);
  if (c < n) step(VecF::load_tail(y + c, n - c)).store_tail(y + c, n - c);
}

template <int C, int P>
void pass(const ReduceArgs& a, int64_t u0, int64_t u1) {
  const bool mean = a.mode == 0;
  const float axis = static_cast<float>(a.axis);
  if (a.inner == 1) {
    for (int64_t o = u0; o < u1; ++o) {
      float v = row<C, P>(a.x + o * a.axis, a.axis);
      if (mean) v = v / axis;
      if (a.coeff != 1.f) v = v * a.coeff;
      a.y[o] = v;
    }
    return;
  }
  for (int64_t u = u0; u < u1; ++u) {
    const int64_t o = u / a.chunks, c0 = u % a.chunks * kReduceChunk, n = min_i(a.inner - c0, kReduceChunk);
    float* y = a.y + o * a.inner + c0;
    columns<C, P>(a.x + o * a.axis * a.inner + c0, y, a.axis, a.inner, n);
    if (mean || a.coeff != 1.f) finish(y, n, axis, mean, a.coeff);
  }
}

}  // namespace

void reduce_f32(const ReduceArgs& a, int64_t u0, int64_t u1) {
  switch (a.mode) {
    case 1: return pass<kMax, kPlain>(a, u0, u1);
    case 2: return pass<kMin, kPlain>(a, u0, u1);
    case 3: return pass<kMul, kPlain>(a, u0, u1);
    case 5: return pass<kAdd, kSquare>(a, u0, u1);
    case 6: return pass<kAdd, kAbs>(a, u0, u1);
    default: return pass<kAdd, kPlain>(a, u0, u1);  // Mean, Sum
  }
}

MSV0_EXPORT(reduce_f32)
}  // namespace MSV0_ISA
}  // namespace msv0

#else  // binding pass
#include <algorithm>
#include <vector>
#include <pybind11/stl.h>

#include "runtime/native.h"

namespace msv0 {
namespace {

class Reduce : public NativeOp {
 public:
  Reduce(const std::vector<int64_t>& x_shape, const std::vector<int64_t>& axes, int32_t mode, float coeff,
         const std::vector<int64_t>& y_shape)
      : fn_(MSV0_DISPATCH(reduce_f32)) {
    const auto rank = static_cast<int64_t>(checked_shape(x_shape, x_shape.size(), "x_shape").size());
    if (mode < 0 || mode > 6) throw ArgError("mode must be in 0..6");
    if (axes.empty()) throw ArgError("axes: at least one");
    std::vector<int64_t> cur = x_shape;
    std::vector<bool> seen(rank);
    for (size_t i = 0; i < axes.size(); ++i) {
      const int64_t ax = axes[i];
      if (ax < 0 || ax >= rank || seen[ax]) throw ArgError("axes: out of range or repeated");
      if (cur[ax] == 0) throw ArgError("axes: cannot reduce an empty dim");
      seen[ax] = true;
      Pass p{1, cur[ax], 1};
      for (int64_t d = 0; d < ax; ++d) p.outer *= cur[d];
      for (int64_t d = ax + 1; d < rank; ++d) p.inner *= cur[d];
      cur[ax] = 1;
      passes_.push_back(p);
      // Passes before the last write scratch, alternating between two halves.
      if (i + 1 < axes.size()) scratch_[i % 2] = std::max(scratch_[i % 2], p.outer * p.inner);
    }
    if (elements(checked_shape(y_shape, y_shape.size(), "y_shape")) != elements(cur))
      throw ArgError("y_shape: does not hold the reduced elements");
    mode_ = mode;
    coeff_ = coeff;
    set_operands({{x_shape}}, {{y_shape}});
  }

  void run(const void* const* in, void* const* out) const override {
    float* scratch = passes_.size() > 1 ? thread_scratch(static_cast<size_t>(scratch_[0] + scratch_[1])) : nullptr;
    const float* x = static_cast<const float*>(in[0]);
    for (size_t i = 0; i < passes_.size(); ++i) {
      const Pass& p = passes_[i];
      const bool last = i + 1 == passes_.size();
      float* y = last ? static_cast<float*>(out[0]) : scratch + (i % 2) * scratch_[0];
      // SumSquare and ASum transform the input on the first pass and sum the partial results after.
      const int32_t mode = i > 0 && mode_ > 4 ? 4 : mode_;
      const int64_t chunks = p.inner == 1 ? 1 : (p.inner + kReduceChunk - 1) / kReduceChunk;
      const ReduceArgs a{x, y, p.axis, p.inner, chunks, mode, last ? coeff_ : 1.f};
      // Units of at least ~4K floats read each, so a chunk outweighs a thread hand-off.
      const int64_t floats = p.axis * std::min(p.inner, kReduceChunk);
      parallel_for(p.outer * chunks, std::max<int64_t>(1, 4096 / std::max<int64_t>(floats, 1)),
                   [&](int64_t u0, int64_t u1) { fn_(a, u0, u1); });
      x = y;
    }
  }
  const char* name() const override { return "reduce"; }

 private:
  struct Pass {
    int64_t outer, axis, inner;
  };
  ReduceFn fn_;
  std::vector<Pass> passes_;
  int64_t scratch_[2] = {0, 0};  // floats of the even and odd passes' outputs
  int32_t mode_ = 0;
  float coeff_ = 1.f;
};

}  // namespace

MSV0_BIND(m) {
  py::class_<Reduce, NativeOp, std::shared_ptr<Reduce>>(
      m, "Reduce",
      "float32 Reduce of x (x_shape) over `axes`, one pass per axis in list order (r1.1's ReduceMode `mode`\n"
      "0..6), the result times `coeff`, written as y_shape (the reduced shape with or without its unit dims).")
      .def(py::init<const std::vector<int64_t>&, const std::vector<int64_t>&, int32_t, float,
                    const std::vector<int64_t>&>(),
           py::arg("x_shape"), py::arg("axes"), py::arg("mode"), py::arg("coeff") = 1.f, py::arg("y_shape"));
}

}  // namespace msv0
#endif
