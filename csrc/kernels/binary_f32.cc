// Element-wise Add/Sub/Mul/Div on float32 with a fused clamp (RELU/RELU6), for the shapes the
// hot paths use: both operands full, one a single value, one a row repeated along the leading
// dims (a per-channel operand on NHWC), or one whose every value is repeated over a row (a
// per-pixel operand [N, H, W, 1] on NHWC). The output is flat; elements [e0, e1) split over
// threads, and each run of a row is one vector loop.
#include "kernels/kernel.h"

namespace msv0 {

enum BinaryOpKind : int32_t { kBinAdd = 0, kBinSub = 1, kBinMul = 2, kBinDiv = 3 };
// How an operand maps onto the flat output: every element, one row of `inner`, one value, or
// one value per row of `inner`.
enum BinaryOperand : int32_t { kOperandFull = 0, kOperandRow = 1, kOperandOne = 2, kOperandPerRow = 3 };

struct BinaryArgs {
  const float* a;
  const float* b;
  float* y;
  int64_t size, inner;  // output elements; row length for kOperandRow / kOperandPerRow operands
  int32_t op, a_kind, b_kind;
  bool clamp;  // a fused activation: without one NaN must pass through untouched
  float lo, hi;
};

using BinaryFn = void (*)(const BinaryArgs&, int64_t e0, int64_t e1);
MSV0_DECLARE(binary_f32, BinaryFn)

}  // namespace msv0

#if !MSV0_ONCE
namespace msv0 {
namespace MSV0_ISA {
namespace {

template <int Op>
VecF apply(VecF a, VecF b) {
  if constexpr (Op == kBinAdd) return a + b;
  if constexpr (Op == kBinSub) return a - b;
  if constexpr (Op == kBinMul) return a * b;
  return a / b;
}

const float* operand(const float* p, int32_t kind, int64_t e, int64_t col, int64_t inner) {
  if (kind == kOperandFull) return p + e;
  if (kind == kOperandRow) return p + col;
  return kind == kOperandPerRow ? p + e / inner : p;
}

template <int Op>
void segment(const BinaryArgs& g, int64_t e, int64_t len, int64_t col) {
  const float* a = operand(g.a, g.a_kind, e, col, g.inner);
  const float* b = operand(g.b, g.b_kind, e, col, g.inner);
  float* y = g.y + e;
  // A segment lies inside one row, so a per-row operand is one value in it.
  const bool a_one = g.a_kind >= kOperandOne, b_one = g.b_kind >= kOperandOne;
  const VecF as = VecF::splat(*a), bs = VecF::splat(*b), lo = VecF::splat(g.lo), hi = VecF::splat(g.hi);
  int64_t i = 0;
  for (; i + VecF::kLanes <= len; i += VecF::kLanes) {
    const VecF x = apply<Op>(a_one ? as : VecF::load(a + i), b_one ? bs : VecF::load(b + i));
    (g.clamp ? min(max(x, lo), hi) : x).store(y + i);
  }
  if (i < len) {
    const int64_t n = len - i;
    const VecF x = apply<Op>(a_one ? as : VecF::load_tail(a + i, n), b_one ? bs : VecF::load_tail(b + i, n));
    (g.clamp ? min(max(x, lo), hi) : x).store_tail(y + i, n);
  }
}

template <int Op>
void run_range(const BinaryArgs& g, int64_t e0, int64_t e1) {
  const bool rows = g.a_kind == kOperandRow || g.b_kind == kOperandRow || g.a_kind == kOperandPerRow ||
                    g.b_kind == kOperandPerRow;
  while (e0 < e1) {
    const int64_t col = rows ? e0 % g.inner : 0;
    const int64_t len = rows ? min_i(e1 - e0, g.inner - col) : e1 - e0;
    segment<Op>(g, e0, len, col);
    e0 += len;
  }
}

}  // namespace

void binary_f32(const BinaryArgs& g, int64_t e0, int64_t e1) {
  switch (g.op) {
    case kBinAdd: return run_range<kBinAdd>(g, e0, e1);
    case kBinSub: return run_range<kBinSub>(g, e0, e1);
    case kBinMul: return run_range<kBinMul>(g, e0, e1);
    default: return run_range<kBinDiv>(g, e0, e1);
  }
}

MSV0_EXPORT(binary_f32)
}  // namespace MSV0_ISA
}  // namespace msv0

#else  // binding pass
#include <string>
#include <vector>
#include <pybind11/stl.h>

#include "runtime/native.h"

namespace msv0 {
namespace {

int64_t operand_size(int32_t kind, int64_t size, int64_t inner) {
  if (kind == kOperandFull) return size;
  if (kind == kOperandRow) return inner;
  return kind == kOperandPerRow ? size / inner : 1;
}

// y = clamp(a op b, lo, hi) on arrays of the shapes fixed here.
class Binary : public NativeOp {
 public:
  Binary(int32_t op, int32_t a_kind, int32_t b_kind, int64_t inner, const std::vector<int64_t>& a_shape,
         const std::vector<int64_t>& b_shape, const std::vector<int64_t>& y_shape, float lo, float hi)
      : fn_(MSV0_DISPATCH(binary_f32)) {
    if (op < kBinAdd || op > kBinDiv) throw ArgError("unknown binary op " + std::to_string(op));
    for (int32_t k : {a_kind, b_kind})
      if (k < kOperandFull || k > kOperandPerRow) throw ArgError("unknown operand kind " + std::to_string(k));
    const int64_t size = elements(checked_shape(y_shape, y_shape.size(), "y_shape"));
    const bool rows = a_kind == kOperandRow || b_kind == kOperandRow || a_kind == kOperandPerRow ||
                      b_kind == kOperandPerRow;
    if (inner < 1 || (rows && size % inner))
      throw ArgError("bad sizes: " + std::to_string(size) + " elements, rows of " + std::to_string(inner));
    if (elements(checked_shape(a_shape, a_shape.size(), "a_shape")) != operand_size(a_kind, size, inner))
      throw ArgError("a_shape: wrong number of elements for its kind");
    if (elements(checked_shape(b_shape, b_shape.size(), "b_shape")) != operand_size(b_kind, size, inner))
      throw ArgError("b_shape: wrong number of elements for its kind");
    const bool clamp = lo > -INFINITY || hi < INFINITY;
    g_ = BinaryArgs{nullptr, nullptr, nullptr, size, inner, op, a_kind, b_kind, clamp, lo, hi};
    set_operands({{a_shape}, {b_shape}}, {{y_shape}});
  }

  void run(const void* const* in, void* const* out) const override {
    BinaryArgs g = g_;
    g.a = static_cast<const float*>(in[0]);
    g.b = static_cast<const float*>(in[1]);
    g.y = static_cast<float*>(out[0]);
    // 16K elements per chunk: large enough that a chunk outweighs a thread hand-off.
    parallel_for(g.size, 16384, [&](int64_t e0, int64_t e1) { fn_(g, e0, e1); });
  }
  const char* name() const override { return "binary"; }

 private:
  BinaryFn fn_;
  BinaryArgs g_;
};

}  // namespace

MSV0_BIND(m) {
  py::class_<Binary, NativeOp, std::shared_ptr<Binary>>(m, "Binary",
      "y = clamp(a op b, lo, hi) on float32; op 0..3 = add, sub, mul, div; operand kinds 0 = full, "
      "1 = a row of `inner` repeated, 2 = one value, 3 = one value per row of `inner`; arrays of exactly "
      "a_shape, b_shape, y_shape.")
      .def(py::init<int32_t, int32_t, int32_t, int64_t, const std::vector<int64_t>&, const std::vector<int64_t>&,
                    const std::vector<int64_t>&, float, float>(),
           py::arg("op"), py::arg("a_kind"), py::arg("b_kind"), py::arg("inner"), py::arg("a_shape"),
           py::arg("b_shape"), py::arg("y_shape"), py::arg("lo") = -INFINITY, py::arg("hi") = INFINITY);
}

}  // namespace msv0
#endif
