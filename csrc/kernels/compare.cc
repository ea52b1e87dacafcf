// Comparisons (Equal, NotEqual, Less, LessEqual, Greater, GreaterEqual) of two float32 or two
// int32 operands into bool, on binary_loop.h's operand kinds (full, a row repeated, one value,
// one value per row): a one-hot encoder's Equal of [N, 1] ids against a [1, C] range is a
// per-row operand against a row. The output is flat; elements [e0, e1) split over threads, and
// each run of a row is one loop the compiler vectorizes for the tier.
#include "kernels/binary_loop.h"

namespace msv0 {

enum CompareOp : int32_t { kEqual = 0, kNotEqual = 1, kLess = 2, kLessEqual = 3, kGreater = 4, kGreaterEqual = 5 };

struct CompareArgs {
  const void* a;
  const void* b;
  bool* y;
  int64_t size, inner;  // output elements; row length for row and per-row operands
  int32_t op, a_kind, b_kind;
  bool is_int;  // int32 operands, else float32
};

using CompareFn = void (*)(const CompareArgs&, int64_t e0, int64_t e1);
MSV0_DECLARE(compare, CompareFn)

}  // namespace msv0

#if !MSV0_ONCE
namespace msv0 {
namespace MSV0_ISA {
namespace {

template <int Op, typename T>
bool holds(T a, T b) {  // IEEE: every comparison with NaN is false but NotEqual, as in NumPy
  if constexpr (Op == kEqual) return a == b;
  if constexpr (Op == kNotEqual) return a != b;
  if constexpr (Op == kLess) return a < b;
  if constexpr (Op == kLessEqual) return a <= b;
  if constexpr (Op == kGreater) return a > b;
  return a >= b;
}

template <int Op, typename T>
void segment(const CompareArgs& g, int64_t e, int64_t len, int64_t col) {
  const T* a = binary_operand(static_cast<const T*>(g.a), g.a_kind, e, col, g.inner);
  const T* b = binary_operand(static_cast<const T*>(g.b), g.b_kind, e, col, g.inner);
  bool* y = g.y + e;
  // A segment lies inside one row, so a per-row operand is one value in it.
  const bool a_one = g.a_kind >= kOperandOne, b_one = g.b_kind >= kOperandOne;
  if (a_one && b_one) {
    const bool v = holds<Op>(*a, *b);
    for (int64_t i = 0; i < len; ++i) y[i] = v;
  } else if (a_one) {
    const T av = *a;
    for (int64_t i = 0; i < len; ++i) y[i] = holds<Op>(av, b[i]);
  } else if (b_one) {
    const T bv = *b;
    for (int64_t i = 0; i < len; ++i) y[i] = holds<Op>(a[i], bv);
  } else {
    for (int64_t i = 0; i < len; ++i) y[i] = holds<Op>(a[i], b[i]);
  }
}

template <int Op, typename T>
void run_range(const CompareArgs& g, int64_t e0, int64_t e1) {
  const bool rows = binary_has_rows(g.a_kind, g.b_kind);
  while (e0 < e1) {
    const int64_t col = rows ? e0 % g.inner : 0;
    const int64_t len = rows ? min_i(e1 - e0, g.inner - col) : e1 - e0;
    segment<Op, T>(g, e0, len, col);
    e0 += len;
  }
}

template <typename T>
void run_typed(const CompareArgs& g, int64_t e0, int64_t e1) {
  switch (g.op) {
    case kEqual: return run_range<kEqual, T>(g, e0, e1);
    case kNotEqual: return run_range<kNotEqual, T>(g, e0, e1);
    case kLess: return run_range<kLess, T>(g, e0, e1);
    case kLessEqual: return run_range<kLessEqual, T>(g, e0, e1);
    case kGreater: return run_range<kGreater, T>(g, e0, e1);
    default: return run_range<kGreaterEqual, T>(g, e0, e1);
  }
}

}  // namespace

void compare(const CompareArgs& g, int64_t e0, int64_t e1) {
  if (g.is_int)
    run_typed<int32_t>(g, e0, e1);
  else
    run_typed<float>(g, e0, e1);
}

MSV0_EXPORT(compare)
}  // namespace MSV0_ISA
}  // namespace msv0

#else  // binding pass
#include <string>
#include <vector>
#include <pybind11/stl.h>

#include "runtime/native.h"

namespace msv0 {
namespace {

// y = a op b on arrays of the dtype and shapes fixed here.
class Compare : public NativeOp {
 public:
  Compare(int32_t op, char type, int32_t a_kind, int32_t b_kind, int64_t inner, const std::vector<int64_t>& a_shape,
          const std::vector<int64_t>& b_shape, const std::vector<int64_t>& y_shape)
      : fn_(MSV0_DISPATCH(compare)) {
    if (op < kEqual || op > kGreaterEqual) throw ArgError("unknown comparison " + std::to_string(op));
    if (type != 'f' && type != 'i') throw ArgError("type must be 'f' (float32) or 'i' (int32)");
    const int64_t size = binary_size(a_kind, b_kind, inner, a_shape, b_shape, y_shape);
    g_ = CompareArgs{nullptr, nullptr, nullptr, size, inner, op, a_kind, b_kind, type == 'i'};
    set_operands({{a_shape, type}, {b_shape, type}}, {{y_shape, '?'}});
  }

  void run(const void* const* in, void* const* out) const override {
    CompareArgs g = g_;
    g.a = in[0];
    g.b = in[1];
    g.y = static_cast<bool*>(out[0]);
    // 16K elements per chunk: large enough that a chunk outweighs a thread hand-off.
    parallel_for(g.size, 16384, [&](int64_t e0, int64_t e1) { fn_(g, e0, e1); });
  }
  const char* name() const override { return "compare"; }

 private:
  CompareFn fn_;
  CompareArgs g_;
};

}  // namespace

MSV0_BIND(m) {
  py::class_<Compare, NativeOp, std::shared_ptr<Compare>>(m, "Compare",
      "y = a op b into bool, a and b float32 (type 'f') or int32 ('i'); op 0..5 = equal, not equal, less, "
      "less or equal, greater, greater or equal; operand kinds as Binary's; arrays of exactly a_shape, b_shape, "
      "y_shape.")
      .def(py::init<int32_t, char, int32_t, int32_t, int64_t, const std::vector<int64_t>&, const std::vector<int64_t>&,
                    const std::vector<int64_t>&>(),
           py::arg("op"), py::arg("type"), py::arg("a_kind"), py::arg("b_kind"), py::arg("inner"), py::arg("a_shape"),
           py::arg("b_shape"), py::arg("y_shape"));
}

}  // namespace msv0
#endif
