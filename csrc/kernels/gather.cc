// Gather of 4-byte elements (float32, int32; format-v0.md §5): x seen as [outer, size, inner],
// y[o, k, :] = x[o, indices[k], :]. Indices are int32 or int64, fixed when the object is built or
// read at run time; run-time indices are all checked before anything is copied, and one outside
// [0, size) raises msv0.InputError naming the node (r1.1 reads out of bounds there).
#include "kernels/kernel.h"

namespace msv0 {

struct GatherArgs {
  const uint32_t* x;
  uint32_t* y;
  const void* indices;  // count int32 or int64 values, all in [0, size)
  bool wide;            // int64 indices
  int64_t count, size, inner;
};

// Rows [r0, r1) of y seen as [outer · count, inner].
using GatherFn = void (*)(const GatherArgs&, int64_t r0, int64_t r1);
MSV0_DECLARE(gather_32, GatherFn)

}  // namespace msv0

#if !MSV0_ONCE
namespace msv0 {
namespace MSV0_ISA {

void gather_32(const GatherArgs& a, int64_t r0, int64_t r1) {
  const size_t bytes = static_cast<size_t>(a.inner) * sizeof(uint32_t);
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t o = r / a.count, k = r % a.count;
    const int64_t i = a.wide ? static_cast<const int64_t*>(a.indices)[k] : static_cast<const int32_t*>(a.indices)[k];
    __builtin_memcpy(a.y + r * a.inner, a.x + (o * a.size + i) * a.inner, bytes);
  }
}

MSV0_EXPORT(gather_32)
}  // namespace MSV0_ISA
}  // namespace msv0

#else  // binding pass
#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>
#include <pybind11/stl.h>

#include "runtime/native.h"

namespace msv0 {
namespace {

// Raised as msv0.InputError (see the translator below).
struct IndexError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What is wrong with `count` indices for an axis of `size`, or "" when all are in range.
template <class T>
std::string bad_indices(const T* idx, int64_t count, int64_t size) {
  if (count == 0) return "";
  const auto [lo, hi] = std::minmax_element(idx, idx + count);
  if (*lo >= 0 && *hi < size) return "";
  return "indices must lie in [0, " + std::to_string(size) + "), got values from " + std::to_string(*lo) + " to " +
         std::to_string(*hi) + " (r1.1 does not wrap negatives and reads out of bounds past the end)";
}

char int64_char() { return py::dtype::of<int64_t>().char_(); }

class Gather : public NativeOp {
 public:
  Gather(char type, const std::vector<int64_t>& x_shape, int64_t axis, const std::vector<int64_t>& indices_shape,
         char index_type, std::optional<py::array> indices, std::string label)
      : fn_(MSV0_DISPATCH(gather_32)), label_(std::move(label)) {
    if (type != 'f' && type != 'i') throw ArgError("type must be 'f' (float32) or 'i' (int32)");
    const auto rank = static_cast<int64_t>(checked_shape(x_shape, x_shape.size(), "x_shape").size());
    if (axis < 0 || axis >= rank) throw ArgError("axis out of range");
    checked_shape(indices_shape, indices_shape.size(), "indices_shape");
    wide_ = index_type != 'i';
    if (wide_ && index_type != int64_char()) throw ArgError("index_type must be int32 or int64");
    outer_ = elements({x_shape.begin(), x_shape.begin() + axis});
    size_ = x_shape[axis];
    inner_ = elements({x_shape.begin() + axis + 1, x_shape.end()});
    count_ = elements(indices_shape);
    std::vector<int64_t> y_shape(x_shape.begin(), x_shape.begin() + axis);
    y_shape.insert(y_shape.end(), indices_shape.begin(), indices_shape.end());
    y_shape.insert(y_shape.end(), x_shape.begin() + axis + 1, x_shape.end());
    if (indices) {
      expect_shape(*indices, indices_shape, "indices");
      const int64_t* p = in_ptr<int64_t>(*indices, "indices");
      const std::string bad = bad_indices(p, count_, size_);
      if (!bad.empty()) throw ArgError(bad);
      fixed_.assign(p, p + count_);
      wide_ = true;
      set_operands({{x_shape, type}}, {{y_shape, type}});
    } else {
      set_operands({{x_shape, type}, {indices_shape, wide_ ? int64_char() : 'i'}}, {{y_shape, type}});
    }
  }

  void run(const void* const* in, void* const* out) const override {
    const void* idx = fixed_.data();
    if (inputs().size() == 2) {
      idx = in[1];
      const std::string bad = wide_ ? bad_indices(static_cast<const int64_t*>(idx), count_, size_)
                                    : bad_indices(static_cast<const int32_t*>(idx), count_, size_);
      if (!bad.empty()) throw IndexError(label_ + ": " + bad);
    }
    const GatherArgs a{static_cast<const uint32_t*>(in[0]), static_cast<uint32_t*>(out[0]), idx, wide_, count_, size_,
                       inner_};
    // Rows of at least ~4K elements per chunk, so a chunk outweighs a thread hand-off.
    parallel_for(outer_ * count_, std::max<int64_t>(1, 4096 / std::max<int64_t>(inner_, 1)),
                 [&](int64_t r0, int64_t r1) { fn_(a, r0, r1); });
  }
  const char* name() const override { return "gather"; }

 private:
  GatherFn fn_;
  std::string label_;
  std::vector<int64_t> fixed_;
  bool wide_ = false;
  int64_t outer_ = 1, size_ = 0, inner_ = 1, count_ = 0;
};

}  // namespace

MSV0_BIND(m) {
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const IndexError& e) {
      py::object cls = py::module_::import("msv0.errors").attr("InputError");
      PyErr_SetString(cls.ptr(), e.what());
    }
  });

  py::class_<Gather, NativeOp, std::shared_ptr<Gather>>(
      m, "Gather",
      "y = x gathered along `axis` at `indices`, x of `type` 'f' (float32) or 'i' (int32) and x_shape. `indices`\n"
      "(int64, indices_shape) fixes them; without it they are the second input, of index_type 'i' (int32) or\n"
      "int64's, checked on every run: one outside [0, x_shape[axis]) raises msv0.InputError starting with `label`.")
      .def(py::init<char, const std::vector<int64_t>&, int64_t, const std::vector<int64_t>&, char,
                    std::optional<py::array>, std::string>(),
           py::arg("type"), py::arg("x_shape"), py::arg("axis"), py::arg("indices_shape"), py::arg("index_type"),
           py::arg("indices") = py::none(), py::arg("label") = "gather");
}

}  // namespace msv0
#endif
