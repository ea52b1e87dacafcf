// LayerNorm over rows of `block` floats (format-v0.md LayerNorm, r1.1's layer_norm_fp32.c):
// mean = Σx/n and var = Σx²/n − mean², both in float in one pass; y = (x − mean) / sqrt(var +
// eps), then · gamma + beta per element of the block when affine. Rows split over threads.
#include "kernels/kernel.h"

#include <cmath>

namespace msv0 {

struct LayerNormArgs {
  const float* x;
  float* y;
  const float* gamma;  // block floats each, or null
  const float* beta;
  int64_t block;
  float eps;
};

// Rows [r0, r1).
using LayerNormFn = void (*)(const LayerNormArgs&, int64_t r0, int64_t r1);
MSV0_DECLARE(layer_norm_f32, LayerNormFn)

}  // namespace msv0

#if !MSV0_ONCE
namespace msv0 {
namespace MSV0_ISA {

void layer_norm_f32(const LayerNormArgs& a, int64_t r0, int64_t r1) {
  constexpr int64_t L = VecF::kLanes;
  const int64_t n = a.block, whole = n / L * L;
  for (int64_t r = r0; r < r1; ++r) {
    const float* x = a.x + r * n;
    float* y = a.y + r * n;
    VecF sum = VecF::zero(), sq = VecF::zero();
    for (int64_t i = 0; i < whole; i += L) {
      const VecF v = VecF::load(x + i);
      sum = sum + v;
      sq = fmadd(v, v, sq);
    }
    if (whole < n) {
      const VecF v = VecF::load_tail(x + whole, n - whole);
      sum = sum + v;
      sq = fmadd(v, v, sq);
    }
    const float mean = reduce_add(sum) / static_cast<float>(n);
    const float var = reduce_add(sq) / static_cast<float>(n) - mean * mean;
    const VecF vmean = VecF::splat(mean), vstd = VecF::splat(std::sqrt(var + a.eps));
    const auto row = [&](int64_t i, int64_t lanes) {
      const bool tail = lanes < L;
      VecF v = ((tail ? VecF::load_tail(x + i, lanes) : VecF::load(x + i)) - vmean) / vstd;
      if (a.gamma)
        v = fmadd(v, tail ? VecF::load_tail(a.gamma + i, lanes) : VecF::load(a.gamma + i),
                  tail ? VecF::load_tail(a.beta + i, lanes) : VecF::load(a.beta + i));
      tail ? v.store_tail(y + i, lanes) : v.store(y + i);
    };
    for (int64_t i = 0; i < whole; i += L) row(i, L);
    if (whole < n) row(whole, n - whole);
  }
}

MSV0_EXPORT(layer_norm_f32)
}  // namespace MSV0_ISA
}  // namespace msv0

#else  // binding pass
#include <optional>
#include <vector>
#include <pybind11/stl.h>

#include "runtime/native.h"

namespace msv0 {
namespace {

class LayerNorm : public NativeOp {
 public:
  LayerNorm(int64_t block, float eps, std::optional<py::array> gamma, std::optional<py::array> beta,
            const std::vector<int64_t>& x_shape)
      : fn_(MSV0_DISPATCH(layer_norm_f32)), block_(block), eps_(eps) {
    if (block < 1) throw ArgError("block must be >= 1");
    if (elements(checked_shape(x_shape, x_shape.size(), "x_shape")) % block)
      throw ArgError("x_shape: not a whole number of blocks");
    rows_ = elements(x_shape) / block;
    if (gamma.has_value() != beta.has_value()) throw ArgError("gamma and beta come together");
    if (gamma) {
      expect_shape(*gamma, {block}, "gamma");
      expect_shape(*beta, {block}, "beta");
      const float* g = in_ptr<float>(*gamma, "gamma");
      const float* b = in_ptr<float>(*beta, "beta");
      gamma_.assign(g, g + block);
      beta_.assign(b, b + block);
    }
    set_operands({{x_shape}}, {{x_shape}});
  }

  void run(const void* const* in, void* const* out) const override {
    const LayerNormArgs a{static_cast<const float*>(in[0]), static_cast<float*>(out[0]),
                          gamma_.empty() ? nullptr : gamma_.data(), beta_.empty() ? nullptr : beta_.data(), block_,
                          eps_};
    parallel_for(rows_, 1, [&](int64_t r0, int64_t r1) { fn_(a, r0, r1); });
  }
  const char* name() const override { return "layer_norm"; }

 private:
  LayerNormFn fn_;
  int64_t block_, rows_ = 0;
  float eps_;
  std::vector<float> gamma_, beta_;
};

}  // namespace

MSV0_BIND(m) {
  py::class_<LayerNorm, NativeOp, std::shared_ptr<LayerNorm>>(
      m, "LayerNorm",
      "y = (x - mean) / sqrt(var + eps) [· gamma + beta] over each row of `block` floats of x (x_shape), mean and\n"
      "var = Σx²/n - mean² taken per row; gamma and beta hold `block` floats.")
      .def(py::init<int64_t, float, std::optional<py::array>, std::optional<py::array>,
                    const std::vector<int64_t>&>(),
           py::arg("block"), py::arg("eps"), py::arg("gamma") = py::none(), py::arg("beta") = py::none(),
           py::arg("x_shape"));
}

}  // namespace msv0
#endif
