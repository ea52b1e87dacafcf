// int8 SoftMax as nnacl's softmax_int8.c runs it (format-v0.md §3.1 "Softmax int8";
// ops/softmax_s8.py builds the exp table): per row, e = exp_table[max − q] in Q0.31, the sum of
// e / 2^12 inverted by gemmlowp's fixed-point reciprocal, y = e · (1/sum) / 2^(nb + 23) − 128.
// Plain integer code in int64, exactly the arithmetic of the NumPy it replaces; no ISA tier.
#include "kernels/kernel.h"

#if MSV0_ONCE
#include <algorithm>
#include <array>
#include <vector>
#include <pybind11/stl.h>

#include "runtime/native.h"

namespace msv0 {
namespace {

constexpr int64_t kI32Max = 2147483647, kI32Min = -kI32Max - 1;
constexpr int kAccBits = 12;  // the exp sum's integer bits

// SaturatingRoundingDoublingHighMul of int32 values.
int64_t srdhm(int64_t a, int64_t b) {
  if (a == kI32Min && b == kI32Min) return kI32Max;
  const int64_t p = a * b + (a * b >= 0 ? (int64_t{1} << 30) : 1 - (int64_t{1} << 30));
  return p / (int64_t{1} << 31);  // C division truncates, as r1.1's
}

// RoundingDivideByPOT: x / 2^n, half away from zero.
int64_t rdbpot(int64_t x, int n) {
  const int64_t mask = (int64_t{1} << n) - 1;
  return (x >> n) + ((x & mask) > (mask >> 1) + (x < 0 ? 1 : 0) ? 1 : 0);
}

// SaturatingRoundingMultiplyByPOT, positive exponent: x · 2^n saturated to int32.
int64_t sat_shl(int64_t x, int n) {
  const int64_t limit = (int64_t{1} << (31 - n)) - 1;
  return x > limit ? kI32Max : x < -limit ? kI32Min : x * (int64_t{1} << n);
}

// gemmlowp's GetReciprocal of 1 <= s < 2^31 with kAccBits integer bits: 1/s = r · 2^−nb.
int64_t reciprocal(int64_t s, int* nb) {
  const int clz = __builtin_clzll(static_cast<uint64_t>(s)) - 32;
  *nb = kAccBits - clz;
  const int64_t half = ((s << clz) - (int64_t{1} << 31) + kI32Max + 1) >> 1;  // (1 + a) / 2 in Q0.31
  int64_t r = 1515870810 + srdhm(half, -1010580540);                         // 48/17 − 32/17·h, Q2.29
  for (int i = 0; i < 3; ++i) r += sat_shl(srdhm(r, (int64_t{1} << 29) - srdhm(half, r)), 2);
  return sat_shl(r, 1);
}

class SoftmaxS8 : public NativeOp {
 public:
  SoftmaxS8(const py::array& exp_table, const std::vector<int64_t>& shape, int64_t axis) {
    if (exp_table.ndim() != 1 || exp_table.shape(0) != 256) throw ArgError("exp_table: expected 256 int32 values");
    const int32_t* t = in_ptr<int32_t>(exp_table, "exp_table");
    for (int i = 0; i < 256; ++i) {
      if (t[i] < 0) throw ArgError("exp_table: values must be >= 0");
      exp_[i] = t[i];
      exp_sum_[i] = rdbpot(t[i], kAccBits);
    }
    checked_shape(shape, shape.size(), "shape");
    if (axis < 0 || axis >= static_cast<int64_t>(shape.size())) throw ArgError("axis: out of range");
    n_ = shape[axis];
    // Each exp adds at most 2^19 to the sum, which r1.1 keeps in int32.
    if (n_ > 4095) throw ArgError("shape: the axis is longer than 4095");
    if (exp_[0] != kI32Max) throw ArgError("exp_table: exp(0) must be 2^31 - 1");
    for (int64_t d = 0; d < axis; ++d) outer_ *= shape[d];
    for (size_t d = axis + 1; d < shape.size(); ++d) inner_ *= shape[d];
    set_operands({{shape, 'b'}}, {{shape, 'b'}});
  }

  void run(const void* const* in, void* const* out) const override {
    const auto* x = static_cast<const int8_t*>(in[0]);
    auto* y = static_cast<int8_t*>(out[0]);
    const int64_t n = n_, inner = inner_;
    if (n == 0 || inner == 0 || outer_ == 0) return;  // nothing to compute (and no block width)
    const int64_t width = std::min(kBlock, inner), blocks = (inner + width - 1) / width;
    // Tasks of up to kBlock rows side by side (adjacent positions of the dims after the axis), so
    // that each pass over the axis reads contiguous bytes.
    parallel_for(outer_ * blocks, grain_for(4 * n * width), [&](int64_t t0, int64_t t1) {
      int32_t top[kBlock];
      int64_t sum[kBlock], inv[kBlock], half[kBlock];
      int shift[kBlock];
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t j0 = (t % blocks) * width, w = std::min(width, inner - j0);
        const int8_t* xb = x + (t / blocks) * n * inner + j0;
        int8_t* yb = y + (xb - x);
        for (int64_t j = 0; j < w; ++j) top[j] = -128, sum[j] = 0;
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < w; ++j) top[j] = std::max<int32_t>(top[j], xb[i * inner + j]);
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < w; ++j) sum[j] += exp_sum_[top[j] - xb[i * inner + j]];
        for (int64_t j = 0; j < w; ++j) {
          inv[j] = reciprocal(sum[j], &shift[j]);
          shift[j] += 31 - 8;
          half[j] = int64_t{1} << (shift[j] - 1);
        }
        // rdbpot(srdhm(inv, e), shift) − 128: inv > 0 and e >= 0, so both round half up, and
        // srdhm never saturates.
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < w; ++j) {
            const int64_t h = (inv[j] * exp_[top[j] - xb[i * inner + j]] + (int64_t{1} << 30)) >> 31;
            const int64_t v = ((h + half[j]) >> shift[j]) - 128;
            yb[i * inner + j] = static_cast<int8_t>(v > 127 ? 127 : v);
          }
      }
    });
  }
  const char* name() const override { return "softmax_s8"; }

 private:
  static constexpr int64_t kBlock = 64;
  std::array<int64_t, 256> exp_{};      // exp of −d, d = max − q in [0, 255], in Q0.31
  std::array<int64_t, 256> exp_sum_{};  // what each adds to the sum: exp_ / 2^12, rounded
  int64_t n_ = 0, outer_ = 1, inner_ = 1;
};

}  // namespace

MSV0_BIND(m) {
  py::class_<SoftmaxS8, NativeOp, std::shared_ptr<SoftmaxS8>>(
      m, "SoftmaxS8",
      "r1.1's int8 softmax over `axis` of an int8 array of `shape` (output scale 1/256, zero point -128); "
      "exp_table[d]: exp of the difference -d from the row's max, in Q0.31 (256 int32 values).")
      .def(py::init<const py::array&, const std::vector<int64_t>&, int64_t>(), py::arg("exp_table"),
           py::arg("shape"), py::arg("axis"));
}

}  // namespace msv0
#endif
