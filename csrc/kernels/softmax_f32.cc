// SoftMax, float32 (format-v0.md §5): y = e^(x − max) / Σ e^(x − max) along one axis, the tensor
// seen as [outer, axis, inner]. With inner = 1 the vector lanes run along the axis; otherwise
// along inner, so every axis reads contiguous memory. e^x is the activation kernel's vector exp
// (within ~1 ulp), where r1.1 uses its polynomial ExpFp32 on the last axis and libm elsewhere.
#include "kernels/kernel.h"
#include "kernels/vec_exp.h"

namespace msv0 {

struct SoftmaxArgs {
  const float* x;
  float* y;
  int64_t axis, inner;
};

// Rows [o0, o1) of outer.
using SoftmaxFn = void (*)(const SoftmaxArgs&, int64_t o0, int64_t o1);
MSV0_DECLARE(softmax_f32, SoftmaxFn)

}  // namespace msv0

#if !MSV0_ONCE
namespace msv0 {
namespace MSV0_ISA {
namespace {

// One row of `n` contiguous values.
void row(const float* x, float* y, int64_t n) {
  constexpr int64_t L = VecF::kLanes;
  float mx = -INFINITY;
  int64_t i = 0;
  if (n >= L) {
    VecF m = VecF::load(x);
    for (i = L; i + L <= n; i += L) m = max(m, VecF::load(x + i));
    mx = reduce_max(m);
  }
  for (; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  const VecF vmx = VecF::splat(mx);
  VecF sum = VecF::zero();
  float tail_sum = 0.f;
  for (i = 0; i + L <= n; i += L) {
    const VecF e = exp_f(VecF::load(x + i) - vmx);
    e.store(y + i);
    sum = sum + e;
  }
  if (i < n) {
    const VecF e = exp_f(VecF::load_tail(x + i, n - i) - vmx);
    e.store_tail(y + i, n - i);
    for (int64_t k = i; k < n; ++k) tail_sum += y[k];
  }
  const VecF total = VecF::splat(reduce_add(sum) + tail_sum);
  for (i = 0; i + L <= n; i += L) (VecF::load(y + i) / total).store(y + i);
  if (i < n) (VecF::load_tail(y + i, n - i) / total).store_tail(y + i, n - i);
}

// Lanes [c, c + lanes) of inner, over the whole axis (stride `inner`).
template <bool Tail>
void columns(const float* x, float* y, int64_t axis, int64_t inner, int64_t lanes) {
  VecF mx = load_n<Tail>(x, lanes);
  for (int64_t a = 1; a < axis; ++a) mx = max(mx, load_n<Tail>(x + a * inner, lanes));
  VecF sum = VecF::zero();
  for (int64_t a = 0; a < axis; ++a) {
    const VecF e = exp_f(load_n<Tail>(x + a * inner, lanes) - mx);
    store_n<Tail>(e, y + a * inner, lanes);
    sum = sum + e;
  }
  for (int64_t a = 0; a < axis; ++a) store_n<Tail>(load_n<Tail>(y + a * inner, lanes) / sum, y + a * inner, lanes);
}

}  // namespace

void softmax_f32(const SoftmaxArgs& g, int64_t o0, int64_t o1) {
  const int64_t block = g.axis * g.inner;
  for (int64_t o = o0; o < o1; ++o) {
    const float* x = g.x + o * block;
    float* y = g.y + o * block;
    if (g.inner == 1) {
      row(x, y, g.axis);
      continue;
    }
    int64_t c = 0;
    for (; c + VecF::kLanes <= g.inner; c += VecF::kLanes) columns<false>(x + c, y + c, g.axis, g.inner, VecF::kLanes);
    if (c < g.inner) columns<true>(x + c, y + c, g.axis, g.inner, g.inner - c);
  }
}

MSV0_EXPORT(softmax_f32)
}  // namespace MSV0_ISA
}  // namespace msv0

#else  // binding pass
#include <algorithm>
#include <string>
#include <vector>
#include <pybind11/stl.h>

#include "runtime/native.h"

namespace msv0 {
namespace {

class Softmax : public NativeOp {
 public:
  Softmax(const std::vector<int64_t>& shape, int64_t axis) : fn_(MSV0_DISPATCH(softmax_f32)) {
    const auto& s = checked_shape(shape, shape.size(), "shape");
    if (axis < 0 || axis >= static_cast<int64_t>(s.size())) throw ArgError("axis out of range");
    outer_ = 1;
    for (int64_t d = 0; d < axis; ++d) outer_ *= s[d];
    int64_t inner = 1;
    for (size_t d = axis + 1; d < s.size(); ++d) inner *= s[d];
    g_ = SoftmaxArgs{nullptr, nullptr, s[axis], inner};
    set_operands({{s}}, {{s}});
  }

  void run(const void* const* in, void* const* out) const override {
    SoftmaxArgs g = g_;
    g.x = static_cast<const float*>(in[0]);
    g.y = static_cast<float*>(out[0]);
    if (g.axis == 0 || g.inner == 0) return;
    // Rows of at least ~4K floats per chunk, so a chunk outweighs a thread hand-off.
    const int64_t grain = std::max<int64_t>(1, 4096 / (g.axis * g.inner));
    parallel_for(outer_, grain, [&](int64_t o0, int64_t o1) { fn_(g, o0, o1); });
  }
  const char* name() const override { return "softmax"; }

 private:
  SoftmaxFn fn_;
  SoftmaxArgs g_;
  int64_t outer_ = 1;
};

}  // namespace

MSV0_BIND(m) {
  py::class_<Softmax, NativeOp, std::shared_ptr<Softmax>>(m, "Softmax",
      "float32 softmax along `axis` of arrays of exactly `shape`.")
      .def(py::init<const std::vector<int64_t>&, int64_t>(), py::arg("shape"), py::arg("axis"));
}

}  // namespace msv0
#endif
