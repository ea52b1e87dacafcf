// int8 SoftMax as nnacl's softmax_int8.c runs it (format-v0.md §3.1 "Softmax int8";
// ops/softmax_s8.py builds the exp table): per row, e = exp_table[max − q] in Q0.31, the sum of
// e / 2^12 inverted by gemmlowp's fixed-point reciprocal, y = e · (1/sum) / 2^(nb + 23) − 128.
// Rows side by side (adjacent positions of the dims after the axis), a vector of them at a time:
// each pass over the axis reads contiguous bytes, the table reads are gathers (AVX2, AVX-512; a
// lane at a time elsewhere), the reciprocal is scalar per row. Exactly the NumPy it replaced.
#include "kernels/kernel.h"

namespace msv0 {

struct SoftmaxS8Args {
  const int8_t* x;
  int8_t* y;
  const int32_t* exp;      // exp of −d, d = max − q in [0, 255], in Q0.31
  const int32_t* exp_sum;  // what each adds to the sum: exp / 2^12, rounded
  int64_t n, inner, blocks, width;  // the axis, the positions after it, in blocks of `width`
};
// Tasks [t0, t1) of outer × blocks: block t % blocks of the rows of outer index t / blocks.
using SoftmaxS8Fn = void (*)(const SoftmaxS8Args&, int64_t t0, int64_t t1);
MSV0_DECLARE(softmax_s8, SoftmaxS8Fn)
constexpr int64_t kSoftmaxS8Block = 64;  // rows side by side, at most

}  // namespace msv0

#if !MSV0_ONCE
namespace msv0 {
namespace MSV0_ISA {
namespace {

constexpr int64_t kI32Max = 2147483647, kI32Min = -kI32Max - 1;
constexpr int kAccBits = 12;  // the exp sum's integer bits

// SaturatingRoundingDoublingHighMul of int32 values.
int64_t srdhm(int64_t a, int64_t b) {
  if (a == kI32Min && b == kI32Min) return kI32Max;
  const int64_t p = a * b + (a * b >= 0 ? (int64_t{1} << 30) : 1 - (int64_t{1} << 30));
  return p / (int64_t{1} << 31);  // C division truncates, as r1.1's
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

constexpr int kLanes = VecI32::kLanes;

// table[i] per lane, i in [0, 255].
VecI32 gather(const int32_t* table, VecI32 i) {
#if defined(__AVX512F__)
  return {_mm512_i32gather_epi32(i.v, table, 4)};
#elif defined(__AVX2__)
  return {_mm256_i32gather_epi32(table, i.v, 4)};
#else
  alignas(64) int32_t idx[kLanes], out[kLanes];
  i.store(idx);
  for (int l = 0; l < kLanes; ++l) out[l] = table[idx[l]];
  return VecI32::load(out);
#endif
}

// ((inv · e + 2^30) >> 31 + half) >> shift per lane, in uint64 then uint32: inv, e in [0, 2^31),
// half = 2^(shift−1) < 2^31 for shift <= 31 (0 beyond: the result is then 0, as h < 2^31).
VecI32 scale_down(VecI32 inv, VecI32 e, VecI32 half, VecI32 shift) {
#if defined(__AVX512F__)
  const __m512i r = _mm512_set1_epi64(int64_t{1} << 30);
  const __m512i even = _mm512_srli_epi64(_mm512_add_epi64(_mm512_mul_epu32(inv.v, e.v), r), 31);
  const __m512i odd = _mm512_add_epi64(_mm512_mul_epu32(_mm512_srli_epi64(inv.v, 32), _mm512_srli_epi64(e.v, 32)), r);
  const __m512i h = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 1));  // odd's bits 31.. up by 1
  return {_mm512_srlv_epi32(_mm512_add_epi32(h, half.v), shift.v)};
#elif defined(__AVX2__)
  const __m256i r = _mm256_set1_epi64x(int64_t{1} << 30);
  const __m256i even = _mm256_srli_epi64(_mm256_add_epi64(_mm256_mul_epu32(inv.v, e.v), r), 31);
  const __m256i odd = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(inv.v, 32), _mm256_srli_epi64(e.v, 32)), r);
  const __m256i h = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 1), 0xAA);
  return {_mm256_srlv_epi32(_mm256_add_epi32(h, half.v), shift.v)};
#else
  alignas(64) int32_t a[kLanes], b[kLanes], c[kLanes], d[kLanes];
  inv.store(a), e.store(b), half.store(c), shift.store(d);
  for (int l = 0; l < kLanes; ++l) {
    const uint64_t h = (static_cast<uint64_t>(a[l]) * static_cast<uint64_t>(b[l]) + (uint64_t{1} << 30)) >> 31;
    const uint64_t v = h + static_cast<uint32_t>(c[l]);
    a[l] = d[l] >= 32 ? 0 : static_cast<int32_t>(v >> d[l]);
  }
  return VecI32::load(a);
#endif
}

// Rows [j, j + lanes) of a block (xb: its first row's value at axis index 0), by the passes.
template <bool Tail>
void rows(const SoftmaxS8Args& a, const int8_t* xb, int8_t* yb, int64_t lanes) {
  const int64_t n = a.n, inner = a.inner;
  const VecI32 byte = VecI32::splat(255);
  VecI32 top = VecI32::splat(-128), sum = VecI32::zero();
  for (int64_t i = 0; i < n; ++i) top = max(top, load_s8_n<Tail>(xb + i * inner, lanes));
  // Tail lanes read zeros: & 255 keeps their (unused) table reads inside the table.
  for (int64_t i = 0; i < n; ++i) sum = sum + gather(a.exp_sum, (top - load_s8_n<Tail>(xb + i * inner, lanes)) & byte);
  alignas(64) int32_t s[kLanes], inv[kLanes], half[kLanes], shift[kLanes];
  sum.store(s);
  for (int l = 0; l < kLanes; ++l) {
    int nb = 0;
    inv[l] = l < lanes ? static_cast<int32_t>(reciprocal(s[l], &nb)) : 0;
    shift[l] = nb + 31 - 8;
    half[l] = shift[l] <= 31 ? static_cast<int32_t>(uint32_t{1} << (shift[l] - 1)) : 0;
  }
  // rdbpot(srdhm(inv, e), shift) − 128: inv > 0 and e >= 0, so both round half up, and srdhm
  // never saturates; the result is at most 255 − 128.
  const VecI32 vinv = VecI32::load(inv), vhalf = VecI32::load(half), vshift = VecI32::load(shift);
  for (int64_t i = 0; i < n; ++i) {
    const VecI32 e = gather(a.exp, (top - load_s8_n<Tail>(xb + i * inner, lanes)) & byte);
    store_s8_n<Tail>(min(scale_down(vinv, e, vhalf, vshift) - VecI32::splat(128), VecI32::splat(127)),
                     yb + i * inner, lanes);
  }
}

}  // namespace

void softmax_s8(const SoftmaxS8Args& a, int64_t t0, int64_t t1) {
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t j0 = (t % a.blocks) * a.width, w = min_i(a.width, a.inner - j0);
    const int8_t* xb = a.x + (t / a.blocks) * a.n * a.inner + j0;
    int8_t* yb = a.y + (xb - a.x);
    int64_t j = 0;
    for (; j + kLanes <= w; j += kLanes) rows<false>(a, xb + j, yb + j, kLanes);
    if (j < w) rows<true>(a, xb + j, yb + j, w - j);
  }
}

MSV0_EXPORT(softmax_s8)
}  // namespace MSV0_ISA
}  // namespace msv0

#else  // binding pass
#include <algorithm>
#include <array>
#include <vector>
#include <pybind11/stl.h>

#include "runtime/native.h"

namespace msv0 {
namespace {

class SoftmaxS8 : public NativeOp {
 public:
  SoftmaxS8(const py::array& exp_table, const std::vector<int64_t>& shape, int64_t axis)
      : fn_(MSV0_DISPATCH(softmax_s8)) {
    if (exp_table.ndim() != 1 || exp_table.shape(0) != 256) throw ArgError("exp_table: expected 256 int32 values");
    const int32_t* t = in_ptr<int32_t>(exp_table, "exp_table");
    for (int i = 0; i < 256; ++i) {
      if (t[i] < 0) throw ArgError("exp_table: values must be >= 0");
      exp_[i] = t[i];
      // RoundingDivideByPOT(t, 12): t >= 0 rounds half up.
      exp_sum_[i] = (t[i] >> kAccBits) + ((t[i] & ((1 << kAccBits) - 1)) > ((1 << kAccBits) - 1) / 2 ? 1 : 0);
    }
    checked_shape(shape, shape.size(), "shape");
    if (axis < 0 || axis >= static_cast<int64_t>(shape.size())) throw ArgError("axis: out of range");
    n_ = shape[axis];
    // Each exp adds at most 2^19 to the sum, which r1.1 keeps in int32.
    if (n_ > 4095) throw ArgError("shape: the axis is longer than 4095");
    if (exp_[0] != 2147483647) throw ArgError("exp_table: exp(0) must be 2^31 - 1");
    for (int64_t d = 0; d < axis; ++d) outer_ *= shape[d];
    for (size_t d = axis + 1; d < shape.size(); ++d) inner_ *= shape[d];
    set_operands({{shape, 'b'}}, {{shape, 'b'}});
  }

  void run(const void* const* in, void* const* out) const override {
    if (n_ == 0 || inner_ == 0 || outer_ == 0) return;  // nothing to compute (and no block width)
    const int64_t width = std::min(kSoftmaxS8Block, inner_), blocks = (inner_ + width - 1) / width;
    const SoftmaxS8Args a{static_cast<const int8_t*>(in[0]), static_cast<int8_t*>(out[0]), exp_.data(), exp_sum_.data(),
                          n_, inner_, blocks, width};
    parallel_for(outer_ * blocks, grain_for(4 * n_ * width), [&](int64_t t0, int64_t t1) { fn_(a, t0, t1); });
  }
  const char* name() const override { return "softmax_s8"; }

 private:
  static constexpr int kAccBits = 12;  // the exp sum's integer bits
  SoftmaxS8Fn fn_;
  std::array<int32_t, 256> exp_{};      // exp of −d, d = max − q in [0, 255], in Q0.31
  std::array<int32_t, 256> exp_sum_{};  // what each adds to the sum: exp_ / 2^12, rounded
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
