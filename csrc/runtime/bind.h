// Binding registry and argument checks for the MSV0_ONCE pass of kernel files and for the
// other _core sources. A file adds its Python functions with MSV0_BIND(m) { ... }; module.cc
// runs every registered binder, in file-name order, at import.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace msv0 {
namespace py = pybind11;

using Binder = void (*)(py::module_&);
int register_binder(const char* file, Binder fn);
void run_binders(py::module_& m);

#define MSV0_BIND_CAT2(a, b) a##b
#define MSV0_BIND_CAT(a, b) MSV0_BIND_CAT2(a, b)
#define MSV0_BIND(m)                                                                  \
  static void MSV0_BIND_CAT(msv0_bind_, __LINE__)(::pybind11::module_ & m);           \
  [[maybe_unused]] static const int MSV0_BIND_CAT(msv0_binder_, __LINE__) =           \
      ::msv0::register_binder(__FILE__, &MSV0_BIND_CAT(msv0_bind_, __LINE__));        \
  static void MSV0_BIND_CAT(msv0_bind_, __LINE__)(::pybind11::module_ & m)

// Raised for bad kernel arguments; becomes ValueError. Model problems use ModelError (model.h).
struct ArgError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// Arrays handed to kernels (weights, biases): C-contiguous, of dtype T. `what` names the
// argument in errors.
template <class T>
const T* in_ptr(const py::array& a, const char* what) {
  if (!py::isinstance<py::array_t<T>>(a) || !(a.flags() & py::array::c_style))
    throw ArgError(std::string(what) + ": expected a C-contiguous array of " +
                   py::str(py::dtype::of<T>()).cast<std::string>());
  return static_cast<const T*>(a.data());
}

// Geometry every windowed kernel object checks at construction (the op layer has already
// turned a model's bad values into ModelError; these keep direct callers memory-safe).
inline void check_strides(int64_t sh, int64_t sw, int64_t dh, int64_t dw) {
  if (sh < 1 || sw < 1 || dh < 1 || dw < 1) throw ArgError("strides and dilations must be >= 1");
}

inline void check_pads(int64_t pt, int64_t pl) {
  if (pt < 0 || pl < 0) throw ArgError("pads must be >= 0");
}

// An int8 zero point or clamp bound.
inline int32_t int8_param(int64_t x, const char* what) {
  if (x < -128 || x > 127) throw ArgError(std::string(what) + " must be in [-128, 127]");
  return static_cast<int32_t>(x);
}

// One requantization (mult, left, right) as the lanes' Requant takes it: shifts in [0, 31], and
// mult above INT32_MIN (QuantizeMultiplier never gives it; excluding it spares SRDHM's
// saturation on every tier).
inline void check_requant(int64_t mult, int64_t left, int64_t right, const char* what) {
  if (mult <= INT32_MIN || mult > INT32_MAX) throw ArgError(std::string(what) + ": mult must be in (-2^31, 2^31)");
  if (left < 0 || left > 31 || right < 0 || right > 31)
    throw ArgError(std::string(what) + ": left and right shifts must be in [0, 31]");
}

// A shape a kernel object is built for: dims >= 0 and `rank` of them.
inline const std::vector<int64_t>& checked_shape(const std::vector<int64_t>& s, size_t rank, const char* what) {
  if (s.size() != rank) throw ArgError(std::string(what) + ": expected " + std::to_string(rank) + " dims");
  for (int64_t d : s)
    if (d < 0) throw ArgError(std::string(what) + ": negative dim");
  return s;
}

inline int64_t elements(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

inline std::vector<int64_t> shape_of(const py::array& a) {
  return std::vector<int64_t>(a.shape(), a.shape() + a.ndim());
}

inline void expect_shape(const py::array& a, const std::vector<int64_t>& want, const char* what) {
  if (shape_of(a) != want) {
    std::string s = std::string(what) + ": expected shape (";
    for (size_t i = 0; i < want.size(); ++i) s += (i ? ", " : "") + std::to_string(want[i]);
    s += "), got (";
    for (py::ssize_t i = 0; i < a.ndim(); ++i) s += (i ? ", " : "") + std::to_string(a.shape(i));
    throw ArgError(s + ")");
  }
}

// n int32 values of a (one per output channel), zero-padded to `padded` so kernels load them as
// whole vectors.
inline std::vector<int32_t> padded_int32(const py::array& a, int64_t n, int64_t padded, const char* what) {
  expect_shape(a, {n}, what);
  const int32_t* p = in_ptr<int32_t>(a, what);
  std::vector<int32_t> v(p, p + n);
  v.resize(static_cast<size_t>(padded), 0);
  return v;
}

}  // namespace msv0
