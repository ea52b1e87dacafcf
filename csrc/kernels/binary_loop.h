// The element loop binary_f32.cc and binary_s8.cc share: how each operand maps onto the flat
// output, and the walk over output elements [e0, e1) in runs that lie inside one row, each run
// one vector loop and a masked tail.
#pragma once
#include "kernels/kernel.h"

namespace msv0 {

// How an operand maps onto the flat output: every element, one row of `inner`, one value, or
// one value per row of `inner`.
enum BinaryOperand : int32_t { kOperandFull = 0, kOperandRow = 1, kOperandOne = 2, kOperandPerRow = 3 };

// static: tier passes include this header too (kernel.h's linkage rule).
static inline bool binary_has_rows(int32_t a_kind, int32_t b_kind) {
  return a_kind == kOperandRow || b_kind == kOperandRow || a_kind == kOperandPerRow || b_kind == kOperandPerRow;
}

}  // namespace msv0

#if MSV0_ONCE
#include <string>
#include <vector>

namespace msv0 {

// The output's element count, once the operand kinds, `inner` and the shapes are checked to agree.
inline int64_t binary_size(int32_t a_kind, int32_t b_kind, int64_t inner, const std::vector<int64_t>& a_shape,
                           const std::vector<int64_t>& b_shape, const std::vector<int64_t>& y_shape) {
  for (int32_t k : {a_kind, b_kind})
    if (k < kOperandFull || k > kOperandPerRow) throw ArgError("unknown operand kind " + std::to_string(k));
  const int64_t size = elements(checked_shape(y_shape, y_shape.size(), "y_shape"));
  if (inner < 1 || (binary_has_rows(a_kind, b_kind) && size % inner))
    throw ArgError("bad sizes: " + std::to_string(size) + " elements, rows of " + std::to_string(inner));
  const auto operand_size = [&](int32_t kind) {
    if (kind == kOperandFull) return size;
    if (kind == kOperandRow) return inner;
    return kind == kOperandPerRow ? size / inner : int64_t{1};
  };
  if (elements(checked_shape(a_shape, a_shape.size(), "a_shape")) != operand_size(a_kind))
    throw ArgError("a_shape: wrong number of elements for its kind");
  if (elements(checked_shape(b_shape, b_shape.size(), "b_shape")) != operand_size(b_kind))
    throw ArgError("b_shape: wrong number of elements for its kind");
  return size;
}

}  // namespace msv0

#else
namespace msv0 {
namespace MSV0_ISA {

// The lanes an element type computes in: float32 as VecF, int8 sign-extended to VecI32.
template <class T>
struct BinaryLanes;

template <>
struct BinaryLanes<float> {
  using V = VecF;
  static V load(const float* p) { return V::load(p); }
  static V load_tail(const float* p, int64_t n) { return V::load_tail(p, n); }
  static void store(V v, float* p) { v.store(p); }
  static void store_tail(V v, float* p, int64_t n) { v.store_tail(p, n); }
};

template <>
struct BinaryLanes<int8_t> {
  using V = VecI32;
  static V load(const int8_t* p) { return V::load_s8(p); }
  static V load_tail(const int8_t* p, int64_t n) { return V::load_s8_tail(p, n); }
  static void store(V v, int8_t* p) { v.store_s8(p); }
  static void store_tail(V v, int8_t* p, int64_t n) { v.store_s8_tail(p, n); }
};

template <class T>
const T* binary_operand(const T* p, int32_t kind, int64_t e, int64_t col, int64_t inner) {
  if (kind == kOperandFull) return p + e;
  if (kind == kOperandRow) return p + col;
  return kind == kOperandPerRow ? p + e / inner : p;
}

// y[e] = f(a at e, b at e) for the flat output's elements [e0, e1), each operand read as its
// kind says; f maps two vectors of BinaryLanes<T>::V to one.
template <class T, class F>
void binary_range(const T* pa, int32_t a_kind, const T* pb, int32_t b_kind, T* py, int64_t inner, int64_t e0,
                  int64_t e1, const F& f) {
  using L = BinaryLanes<T>;
  using V = typename L::V;
  const bool rows = binary_has_rows(a_kind, b_kind);
  // A run lies inside one row, so a per-row operand is one value in it.
  const bool a_one = a_kind >= kOperandOne, b_one = b_kind >= kOperandOne;
  while (e0 < e1) {
    const int64_t col = rows ? e0 % inner : 0;
    const int64_t len = rows ? min_i(e1 - e0, inner - col) : e1 - e0;
    const T* a = binary_operand(pa, a_kind, e0, col, inner);
    const T* b = binary_operand(pb, b_kind, e0, col, inner);
    T* y = py + e0;
    const V as = V::splat(*a), bs = V::splat(*b);
    int64_t i = 0;
    for (; i + V::kLanes <= len; i += V::kLanes)
      L::store(f(a_one ? as : L::load(a + i), b_one ? bs : L::load(b + i)), y + i);
    if (i < len) {
      const int64_t n = len - i;
      L::store_tail(f(a_one ? as : L::load_tail(a + i, n), b_one ? bs : L::load_tail(b + i, n)), y + i, n);
    }
    e0 += len;
  }
}

}  // namespace MSV0_ISA
}  // namespace msv0
#endif
