// Element-wise int8 Add/Sub/Mul in r1.1's fixed-point arithmetic (format-v0.md §3.1), on the
// operand shapes binary_f32.cc takes (binary_loop.h): full, a row repeated along the leading
// dims, one value, or one value per row. The output is flat; elements [e0, e1) split over
// threads, each run of a row is one loop over VecI32 lanes of sign-extended int8.
#include "kernels/binary_loop.h"

namespace msv0 {

// Add and Sub rescale each input (its own multiplier, after r1.1's left shift of 20) and add or
// subtract; Mul multiplies the zero-point-free inputs. All then requantize to the output.
enum BinaryS8Kind : int32_t { kBinS8Add = 0, kBinS8Sub = 1, kBinS8Mul = 2 };

// An input's zero point and (Add/Sub) rescaling RDBPOT(SRDHM((q − zp)·2^left, mult), right).
struct BinaryS8Input {
  int32_t zp, mult, left, right;
};

struct BinaryS8Args {
  const int8_t* a;
  const int8_t* b;
  int8_t* y;
  int64_t size, inner;  // output elements; row length for kOperandRow / kOperandPerRow operands
  int32_t op, a_kind, b_kind;
  BinaryS8Input in[2];
  int32_t mult, left, right, zp, lo, hi;  // the output requantization and clamp
  // The float form (see FloatForm), where the binding bounds its error: y = floor(t) with
  // t = qa·fa + qb·fb + f_lo (Mul: (qa − a_zp)(qb − b_zp)·fa + f_lo), taken where t + f_width
  // has the same floor.
  bool float_form;
  float fa, fb, f_lo, f_width;
};

using BinaryS8Fn = void (*)(const BinaryS8Args&, int64_t e0, int64_t e1);
MSV0_DECLARE(binary_s8, BinaryS8Fn)

}  // namespace msv0

#if !MSV0_ONCE
namespace msv0 {
namespace MSV0_ISA {
namespace {

// Add/Sub's rescaling of one input, RDBPOT(SRDHM((q − zp)·2^20, mult), right), in 32-bit lanes
// (the binding checks left = 20, mult >= 0). With d = q − zp, |d| <= 255, SRDHM's
// floor(((d·2^20)·mult + 2^30) / 2^31) is floor((d·mult + 2^10) / 2^11); splitting
// mult = hi·2^11 + lo makes it d·hi + floor((d·lo + 2^10) / 2^11), both products inside int32.
// RDBPOT(h, r) rounds half away from zero: (h + 2^(r−1) − [h < 0]) >> r, and h when r = 0.
struct Rescale {
  VecI32 zp, hi, lo, half, neg, right;

  explicit Rescale(const BinaryS8Input& p)
      : zp(VecI32::splat(p.zp)), hi(VecI32::splat(p.mult >> 11)), lo(VecI32::splat(p.mult & 2047)),
        half(VecI32::splat(p.right > 0 ? 1 << (p.right - 1) : 0)), neg(VecI32::splat(p.right > 0 ? -1 : 0)),
        right(VecI32::splat(p.right)) {}

  // Plain: lo = 0 and right = 0 (the larger-scale input's multiplier is 1/2 = 2^30 / 2^31), where
  // the rounding term is 0 and RDBPOT the identity: d·hi exactly.
  static bool plain(const BinaryS8Input& p) { return (p.mult & 2047) == 0 && p.right == 0; }

  template <bool Plain>
  VecI32 apply(VecI32 q) const {
    const VecI32 d = q - zp;
    if constexpr (Plain) return d * hi;
    const VecI32 h = d * hi + shift_right(d * lo + VecI32::splat(1 << 10), 11);
    return shift_right(h + half + (shift_right(h, 31) & neg), right);
  }
};

template <int Op, bool PlainA = false, bool PlainB = false>
struct Combine {
  Rescale a, b;
  Requant out;

  explicit Combine(const BinaryS8Args& g)
      : a(g.in[0]), b(g.in[1]),
        out{VecI32::splat(g.mult), VecI32::splat(g.left), VecI32::splat(g.right), VecI32::splat(g.zp),
            VecI32::splat(g.lo), VecI32::splat(g.hi)} {}

  // Overflow: Add/Sub rescale |q − zp|·2^20 <= 255·2^20 by a multiplier <= 1/2, so the sum
  // stays below 2^28; Mul's product is at most 256^2.
  VecI32 operator()(VecI32 qa, VecI32 qb) const {
    VecI32 raw;
    if constexpr (Op == kBinS8Mul)
      raw = (qa - a.zp) * (qb - b.zp);
    else if constexpr (Op == kBinS8Add)
      raw = a.template apply<PlainA>(qa) + b.template apply<PlainB>(qb);
    else
      raw = a.template apply<PlainA>(qa) - b.template apply<PlainB>(qb);
    return out(raw);
  }
};

// The op as one float expression: r1.1's rescalings and requantization are each a rounding of
// a product, so y = floor(t) for t = raw·S + y_zp + 1/2 ± w (format-v0.md §3.1; ± by the
// product's sign, w = 2^-(right+1)), raw being Σ_i (q_i − zp_i)·K_i up to one unit per input
// (Add/Sub) or exactly (Mul). The binding folds the constants and bounds the float error and
// the units by eps: t_lo = t − w − eps and t_lo + 2(w + eps) bracket every candidate, and where
// their floors agree that floor is r1.1's result. Elsewhere (about 2(w + eps) of the lanes, a
// vector at a time) the integer form decides. A handful of float ops against the integer form's
// two multiplies and rounding steps per rescaled operand: ResNet-50 int8's 16 residual Adds
// 1.73 -> 0.78 ms (Emerald Rapids, 1 thread).
template <int Op>
struct FloatForm {
  Combine<Op> exact;
  VecF fa, fb, lo_off, width;
  VecI32 a_zp, b_zp, lo, hi;

  explicit FloatForm(const BinaryS8Args& g)
      : exact(g), fa(VecF::splat(g.fa)), fb(VecF::splat(g.fb)), lo_off(VecF::splat(g.f_lo)),
        width(VecF::splat(g.f_width)), a_zp(VecI32::splat(g.in[0].zp)), b_zp(VecI32::splat(g.in[1].zp)),
        lo(VecI32::splat(g.lo)), hi(VecI32::splat(g.hi)) {}

  VecI32 operator()(VecI32 qa, VecI32 qb) const {
    // Mul's product of two 9-bit integers is exact in float.
    const VecF t = Op == kBinS8Mul ? fmadd(to_f32(qa - a_zp) * to_f32(qb - b_zp), fa, lo_off)
                                   : fmadd(to_f32(qa), fa, fmadd(to_f32(qb), fb, lo_off));
    const VecI32 y = floor_i32(t);
    if (any_ne(y, floor_i32(t + width))) return exact(qa, qb);
    return min(hi, max(lo, y));
  }
};

template <class F>
void run_with(const BinaryS8Args& g, int64_t e0, int64_t e1) {
  binary_range(g.a, g.a_kind, g.b, g.b_kind, g.y, g.inner, e0, e1, F(g));
}

template <int Op, bool PlainA = false, bool PlainB = false>
void run_range(const BinaryS8Args& g, int64_t e0, int64_t e1) {
  run_with<Combine<Op, PlainA, PlainB>>(g, e0, e1);
}

// Add or Sub, with each plain input's rescaling a single multiply.
template <int Op>
void add_sub(const BinaryS8Args& g, int64_t e0, int64_t e1) {
  const bool a = Rescale::plain(g.in[0]), b = Rescale::plain(g.in[1]);
  if (a && b) return run_range<Op, true, true>(g, e0, e1);
  if (a) return run_range<Op, true, false>(g, e0, e1);
  if (b) return run_range<Op, false, true>(g, e0, e1);
  run_range<Op>(g, e0, e1);
}

}  // namespace

void binary_s8(const BinaryS8Args& g, int64_t e0, int64_t e1) {
  if (g.float_form) {
    switch (g.op) {
      case kBinS8Add: return run_with<FloatForm<kBinS8Add>>(g, e0, e1);
      case kBinS8Sub: return run_with<FloatForm<kBinS8Sub>>(g, e0, e1);
      default: return run_with<FloatForm<kBinS8Mul>>(g, e0, e1);
    }
  }
  switch (g.op) {
    case kBinS8Add: return add_sub<kBinS8Add>(g, e0, e1);
    case kBinS8Sub: return add_sub<kBinS8Sub>(g, e0, e1);
    default: return run_range<kBinS8Mul>(g, e0, e1);
  }
}

MSV0_EXPORT(binary_s8)
}  // namespace MSV0_ISA
}  // namespace msv0

#else  // binding pass
#include <cmath>
#include <string>
#include <vector>
#include <pybind11/stl.h>

#include "runtime/native.h"

namespace msv0 {
namespace {


void check_requant(const std::vector<int64_t>& r, const char* what) {
  if (r.size() != 3) throw ArgError(std::string(what) + ": expected (mult, left, right)");
  msv0::check_requant(r[0], r[1], r[2], what);
}

BinaryS8Input input_of(int64_t zp, const std::vector<int64_t>& r, const char* what) {
  check_requant(r, what);
  return {int8_param(zp, what), static_cast<int32_t>(r[0]), static_cast<int32_t>(r[1]), static_cast<int32_t>(r[2])};
}

// The real factor a requantization (mult, left, right) applies before its roundings.
double factor(int32_t mult, int32_t left, int32_t right) {
  return std::ldexp(static_cast<double>(mult), left - 31 - right);
}

// Fills g's float form (FloatForm) where its error stays below 2^-10 of an output step and the
// window 2(w + eps) leaves at most 1/256 of the lanes to the integer form; else leaves it off.
void set_float_form(BinaryS8Args& g) {
  g.float_form = false;
  const double s = factor(g.mult, g.left, g.right), w = g.right > 0 ? std::ldexp(1.0, -g.right - 1) : 0.0;
  double ka = s, kb = 0, center = g.zp + 0.5, raw_max = 65536, units = 0;
  if (g.op != kBinS8Mul) {
    const double a = factor(g.in[0].mult, g.in[0].left, g.in[0].right);
    const double b = factor(g.in[1].mult, g.in[1].left, g.in[1].right);
    ka = a * s, kb = (g.op == kBinS8Sub ? -b : b) * s;
    center -= g.in[0].zp * ka + g.in[1].zp * kb;
    raw_max = 255 * (a + b) + 2;
    units = 2 * std::fabs(s);  // each rescaled input is within one unit of d·K
  }
  // raw · 2^left must not wrap, as the form has no wrapping.
  if (std::ldexp(raw_max, g.left) >= 2147483648.0) return;
  // Every intermediate of t (products, partial sums, constants) is at most m in magnitude, and
  // each of its at most seven roundings is off by at most m·2^-24.
  const double m = (g.op == kBinS8Mul ? 65536 * std::fabs(ka) : 128 * (std::fabs(ka) + std::fabs(kb))) +
                   std::fabs(center) + 1;
  const double eps = m * std::ldexp(1.0, -20) + units;
  if (eps > std::ldexp(1.0, -10) || w + eps > std::ldexp(1.0, -9)) return;
  g.float_form = true;
  g.fa = static_cast<float>(ka), g.fb = static_cast<float>(kb);
  g.f_lo = static_cast<float>(center - w - eps), g.f_width = static_cast<float>(2 * (w + eps));
}

// y = clamp(requantize(a op b)) on int8 arrays of the shapes fixed here.
class BinaryS8 : public NativeOp {
 public:
  BinaryS8(int32_t op, int32_t a_kind, int32_t b_kind, int64_t inner, const std::vector<int64_t>& a_shape,
           const std::vector<int64_t>& b_shape, const std::vector<int64_t>& y_shape, int64_t a_zp,
           const std::vector<int64_t>& a_requant, int64_t b_zp, const std::vector<int64_t>& b_requant,
           const std::vector<int64_t>& y_requant, int64_t y_zp, int64_t lo, int64_t hi)
      : fn_(MSV0_DISPATCH(binary_s8)) {
    if (op < kBinS8Add || op > kBinS8Mul) throw ArgError("unknown int8 binary op " + std::to_string(op));
    const int64_t size = binary_size(a_kind, b_kind, inner, a_shape, b_shape, y_shape);
    check_requant(y_requant, "y_requant");
    if (op != kBinS8Mul)  // the inputs' rescaling kernel assumes r1.1's shift (see Rescale)
      for (const auto* r : {&a_requant, &b_requant})
        if (r->size() == 3 && ((*r)[1] != 20 || (*r)[0] < 0))
          throw ArgError("add/sub input requant: left must be 20 and mult >= 0");
    if (lo < -128 || hi > 127 || lo > hi) throw ArgError("need -128 <= lo <= hi <= 127");
    g_ = BinaryS8Args{nullptr, nullptr, nullptr, size, inner, op, a_kind, b_kind,
                      {input_of(a_zp, a_requant, "a"), input_of(b_zp, b_requant, "b")},
                      static_cast<int32_t>(y_requant[0]), static_cast<int32_t>(y_requant[1]),
                      static_cast<int32_t>(y_requant[2]), int8_param(y_zp, "y_zp"), static_cast<int32_t>(lo),
                      static_cast<int32_t>(hi)};
    set_float_form(g_);
    set_operands({{a_shape, 'b'}, {b_shape, 'b'}}, {{y_shape, 'b'}});
  }

  void run(const void* const* in, void* const* out) const override {
    BinaryS8Args g = g_;
    g.a = static_cast<const int8_t*>(in[0]);
    g.b = static_cast<const int8_t*>(in[1]);
    g.y = static_cast<int8_t*>(out[0]);
    // 16K elements per chunk: large enough that a chunk outweighs a thread hand-off.
    parallel_for(g.size, 16384, [&](int64_t e0, int64_t e1) { fn_(g, e0, e1); });
  }
  const char* name() const override { return "binary_s8"; }

 private:
  BinaryS8Fn fn_;
  BinaryS8Args g_;
};

}  // namespace

MSV0_BIND(m) {
  py::class_<BinaryS8, NativeOp, std::shared_ptr<BinaryS8>>(m, "BinaryS8",
      "int8 y = clamp(requant(a op b) + y_zp, lo, hi), r1.1 arithmetic; op 0 = add, 1 = sub (each input\n"
      "rescaled by RDBPOT(SRDHM((q - zp)·2^20, mult), right) first: left = 20, mult >= 0), 2 = mul ((qa - a_zp)·(qb - b_zp));\n"
      "requant = (mult, left, right). Operand kinds 0 = full, 1 = a row of `inner` repeated, 2 = one value,\n"
      "3 = one value per row of `inner`.")
      .def(py::init<int32_t, int32_t, int32_t, int64_t, const std::vector<int64_t>&, const std::vector<int64_t>&,
                    const std::vector<int64_t>&, int64_t, const std::vector<int64_t>&, int64_t,
                    const std::vector<int64_t>&, const std::vector<int64_t>&, int64_t, int64_t, int64_t>(),
           py::arg("op"), py::arg("a_kind"), py::arg("b_kind"), py::arg("inner"), py::arg("a_shape"),
           py::arg("b_shape"), py::arg("y_shape"), py::arg("a_zp"), py::arg("a_requant"), py::arg("b_zp"),
           py::arg("b_requant"), py::arg("y_requant"), py::arg("y_zp"), py::arg("lo") = -128, py::arg("hi") = 127);
}

}  // namespace msv0
#endif
