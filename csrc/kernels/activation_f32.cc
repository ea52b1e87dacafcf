// Element-wise float32 activations as r1.1 computes them (format-v0.md §5: Activation,
// LeakyReLU, PReLU, Elu, Exp, Power with a fixed exponent) and the float32 unary ops Abs, Neg,
// Square, Sqrt, Rsqrt, Reciprocal, Floor, Ceil, Round (IEEE, as in C) and Log, one flat loop over
// the output; PReLU's per-channel slope is a row of the last dim's length, repeated. Sigmoid, Swish, Elu and
// Exp use vec_exp.h (within ~1 ulp of e^x over the whole float range) and Log vec_log.h where
// r1.1 calls libm.
#include "kernels/activation_f32.h"

#include "kernels/kernel.h"
#include "kernels/vec_exp.h"
#include "kernels/vec_log.h"
#include "simd/pragmas.h"

// The formulas are r1.1's unfused float expressions (tanh's Padé form, x·relu6(x+3)/6): an FMA
// contracted from them would round differently from r1.1 and from the tier without FMA. exp_f's
// explicit fmadd calls are still fused where the tier has FMA.
MSV0_FP_CONTRACT_OFF

namespace msv0 {

MSV0_DECLARE(activation_f32, ActivationFn)

}  // namespace msv0

#if !MSV0_ONCE
namespace msv0 {
namespace MSV0_ISA {
namespace {

struct Consts {
  VecF alpha, beta, lo, hi;
  float exponent;
};

// r1.1's cut-offs: above 16.619047 → 1, below −9 → e^x, else 1/(1 + e^−x); one exp either way.
VecF sigmoid(VecF x) {
  const VecF one = VecF::splat(1.f), low = VecF::splat(-9.f);
  const VecF e = exp_f(select_lt(x, low, x, VecF::zero() - x));
  const VecF y = select_lt(VecF::splat(16.619047f), x, one, one / (one + e));
  return select_lt(x, low, e, y);
}

// r1.1's TanhOpt Padé form in its evaluation order; ±1 beyond ±5.
VecF tanh_pade(VecF x) {
  const VecF sq = x * x;
  const VecF a = ((((sq + VecF::splat(378.f)) * sq + VecF::splat(17325.f)) * sq) + VecF::splat(135135.f)) * x;
  const VecF b = ((VecF::splat(28.f) * sq + VecF::splat(3150.f)) * sq + VecF::splat(62370.f)) * sq +
                 VecF::splat(135135.f);
  const VecF one = VecF::splat(1.f), five = VecF::splat(5.f);
  const VecF y = select_lt(five, x, one, a / b);
  return select_lt(x, VecF::zero() - five, VecF::zero() - one, y);
}

VecF relu6_of_x_plus_3(VecF x) { return clamp(x + VecF::splat(3.f), VecF::zero(), VecF::splat(6.f)); }

// r1.1's integer Power: repeated squaring in float32, 1/result for a negative exponent.
VecF power_int(VecF b, int64_t n) {
  VecF r = VecF::splat(1.f);
  for (int64_t e = n < 0 ? -n : n; e; e >>= 1) {
    if (e & 1) r = r * b;
    b = b * b;
  }
  return n < 0 ? VecF::splat(1.f) / r : r;
}

// r1.1's fractional Power: double pow per element, rounded to float.
VecF power_double(VecF b, float p) {
  float t[VecF::kLanes];
  b.store(t);
  for (float& v : t) v = static_cast<float>(std::pow(static_cast<double>(v), static_cast<double>(p)));
  return VecF::load(t);
}

VecF abs(VecF x) { return from_bits(bits(x) & VecI32::splat(0x7FFFFFFF)); }

// C floorf, ceilf and roundf (halves away from 0). Below 2^23 in magnitude through a truncating
// int conversion (x − trunc(x) is exact); from 2^23 up every float is an integer, and NaN and ±inf
// give themselves. The result takes x's sign, as in C: floor(−0) = ceil(−0.5) = round(−0.3) = −0.
template <int Kind>
VecF to_integer(VecF x) {
  const VecF t = to_f32(trunc_i32(x)), one = VecF::splat(1.f);
  VecF r;
  if constexpr (Kind == kActFloor) r = select_lt(x, t, t - one, t);
  if constexpr (Kind == kActCeil) r = select_lt(t, x, t + one, t);
  if constexpr (Kind == kActRound) r = select_le(VecF::splat(0.5f), abs(x - t), abs(t) + one, abs(t));
  const VecI32 sign = bits(x) & VecI32::splat(INT32_MIN);
  r = from_bits((bits(r) & VecI32::splat(0x7FFFFFFF)) + sign);
  return select_lt(abs(x), VecF::splat(8388608.f), r, x);
}

// x / 6 rounded as the division rounds it, without a divide (the divide was most of a fused conv
// epilogue's HSWISH): q0 = x·(1/6), then Markstein's correction with the remainder negated,
// q = q0 − (6·q0 − x)·(1/6), two FMAs. Negated, the correction keeps the sign of a zero quotient,
// ±0 and x / 6 underflowing to 0 included. Equal to x / 6 on every float whose q0 is zero or
// normal and finite (all 2^32 checked exhaustively); where any lane's q0 is subnormal, infinite
// or NaN (the remainder would round, or be inf − inf), the vector divides. A template so the
// scalar tier, whose fmadd is not fused and which always divides, needs no any-lane test.
template <class V>
V div6(V x) {
  if constexpr (V::kLanes == 1) {
    return x / V::splat(6.f);
  } else {
    const V inv = V::splat(1.f / 6.f), six = V::splat(6.f);
    const V q0 = x * inv;
    if (__builtin_expect(any_subnormal_or_nonfinite(q0), 0)) return x / six;
    return fmadd(fmadd(q0, six, x * V::splat(-1.f)), V::splat(-1.f / 6.f), q0);  // x · −1: −0 for +0
  }
}

// GELU as the ONNX converter lowers it (onnx_ops.gelu, constants in python/msv0/gelu.py), the
// same float operations in the same order, so that one pass (fused into the FullConnection that
// produces x) gives exactly what the lowered element-wise steps give.
// tanh form: x·sigmoid(((x·x)·c1 + c2)·x), c1 = a·0.044715 and c2 = a = 2·sqrt(2/pi) in alpha, beta.
VecF gelu_tanh(VecF x, const Consts& c) { return x * sigmoid((x * x * c.alpha + c.beta) * x); }

// erf form: x·Phi(x) = relu(x) - |x|·q, q = 0.5·erfc(|x|/sqrt 2) by Abramowitz-Stegun 7.1.26:
// erfc(m) = t·(a1 + t·(a2 + t·(a3 + t·(a4 + t·a5))))·e^(-m^2), t = 1/(1 + p·m). The constants are the
// float32 roundings of the doubles gelu.py gives the converter.
VecF gelu_erf(VecF x) {
  constexpr float kInvSqrt2 = static_cast<float>(0.70710678118654752440), kP = static_cast<float>(0.3275911);
  constexpr float kA[5] = {static_cast<float>(1.061405429), static_cast<float>(-1.453152027),
                           static_cast<float>(1.421413741), static_cast<float>(-0.284496736),
                           static_cast<float>(0.254829592)};
  const VecF one = VecF::splat(1.f), ax = abs(x), m = ax * VecF::splat(kInvSqrt2);
  const VecF t = one / (m * VecF::splat(kP) + one);
  VecF poly = VecF::splat(kA[0]) * t;
  for (int i = 1; i < 5; ++i) poly = (poly + VecF::splat(kA[i])) * t;
  const VecF e = exp_f(m * m * VecF::splat(-1.f));
  return max(VecF::zero(), x) - ax * (poly * e * VecF::splat(0.5f));
}

// `s` is the slope lane (PReLU per channel) or c.alpha.
template <int Kind>
VecF act(VecF x, VecF s, const Consts& c) {
  const VecF zero = VecF::zero();
  if constexpr (Kind == kActRelu) return max(zero, x);
  if constexpr (Kind == kActRelu6) return clamp(x, zero, VecF::splat(6.f));
  if constexpr (Kind == kActLeakyRelu) return select_lt(zero, x, x, x * c.alpha);
  if constexpr (Kind == kActSigmoid) return sigmoid(x);
  if constexpr (Kind == kActTanh) return tanh_pade(x);
  if constexpr (Kind == kActSwish) return sigmoid(x) * x;
  if constexpr (Kind == kActHswish) return div6(relu6_of_x_plus_3(x) * x);
  if constexpr (Kind == kActHsigmoid) return div6(relu6_of_x_plus_3(x));
  if constexpr (Kind == kActHardTanh) return select_lt(x, c.lo, c.lo, min(c.hi, x));
  if constexpr (Kind == kActPrelu) return select_le(zero, x, x, x * s);
  if constexpr (Kind == kActElu) return select_lt(x, zero, c.alpha * expm1_neg(x), x);
  if constexpr (Kind == kActExp) return exp_f(x * c.alpha) * c.beta;
  if constexpr (Kind == kActAbs) return abs(x);
  if constexpr (Kind == kActNeg) return x * VecF::splat(-1.f);  // flips the sign of ±0 too
  if constexpr (Kind == kActSquare) return x * x;
  if constexpr (Kind == kActSqrt) return sqrt(x);
  if constexpr (Kind == kActRsqrt) return VecF::splat(1.f) / sqrt(x);
  if constexpr (Kind == kActReciprocal) return VecF::splat(1.f) / x;
  if constexpr (Kind == kActLog) return log_f(x);
  if constexpr (Kind == kActFloor || Kind == kActCeil || Kind == kActRound) return to_integer<Kind>(x);
  if constexpr (Kind == kActGeluTanh) return gelu_tanh(x, c);
  if constexpr (Kind == kActGeluErf) return gelu_erf(x);
  // Power: (x·scale + shift)^exponent, two roundings before the power as in r1.1.
  if constexpr (Kind == kActPowerInt) return power_int(x * c.alpha + c.beta, static_cast<int64_t>(c.exponent));
  return power_double(x * c.alpha + c.beta, c.exponent);  // kActPower
}

template <int Kind>
void segment(const ActArgs& g, const Consts& c, int64_t e, int64_t len, int64_t col) {
  const float* x = g.x + e;
  float* y = g.y + e;
  const float* s = g.slope ? g.slope + col : nullptr;
  int64_t i = 0;
  for (; i + VecF::kLanes <= len; i += VecF::kLanes)
    act<Kind>(VecF::load(x + i), s ? VecF::load(s + i) : c.alpha, c).store(y + i);
  if (i < len) {
    const int64_t n = len - i;
    act<Kind>(VecF::load_tail(x + i, n), s ? VecF::load_tail(s + i, n) : c.alpha, c).store_tail(y + i, n);
  }
}

template <int Kind>
void run_range(const ActArgs& g, int64_t e0, int64_t e1) {
  const Consts c{VecF::splat(g.alpha), VecF::splat(g.beta), VecF::splat(g.lo), VecF::splat(g.hi), g.exponent};
  while (e0 < e1) {
    const int64_t col = g.slope ? e0 % g.channels : 0;
    const int64_t len = g.slope ? min_i(e1 - e0, g.channels - col) : e1 - e0;
    segment<Kind>(g, c, e0, len, col);
    e0 += len;
  }
}

using RangeFn = void (*)(const ActArgs&, int64_t, int64_t);
constexpr RangeFn kRanges[kActKindCount] = {
    run_range<kActRelu>, run_range<kActRelu6>, run_range<kActLeakyRelu>, run_range<kActSigmoid>,
    run_range<kActTanh>, run_range<kActSwish>, run_range<kActHswish>, run_range<kActHsigmoid>,
    run_range<kActHardTanh>, run_range<kActPrelu>, run_range<kActElu>, run_range<kActExp>, run_range<kActAbs>,
    run_range<kActNeg>, run_range<kActSquare>, run_range<kActSqrt>, run_range<kActRsqrt>, run_range<kActReciprocal>,
    run_range<kActLog>, run_range<kActPowerInt>, run_range<kActPower>, run_range<kActFloor>, run_range<kActCeil>,
    run_range<kActRound>, run_range<kActGeluTanh>, run_range<kActGeluErf>};

}  // namespace

void activation_f32(const ActArgs& g, int64_t e0, int64_t e1) { kRanges[g.kind](g, e0, e1); }

MSV0_EXPORT(activation_f32)
}  // namespace MSV0_ISA
}  // namespace msv0

#else  // binding pass
#include <numeric>
#include <string>
#include <vector>
#include <pybind11/stl.h>

#include "kernels/post_op.h"
#include "runtime/native.h"

namespace msv0 {
namespace {

// y = f(x) on arrays of exactly `shape`; PReLU reads its slope as a second input at run time.
class Activation : public NativeOp {
 public:
  Activation(int32_t kind, const std::vector<int64_t>& shape, float alpha, float beta, float lo, float hi,
             float exponent, const std::vector<int64_t>& slope_shape, bool channel_shared)
      : fn_(MSV0_DISPATCH(activation_f32)) {
    if (kind < 0 || kind >= kActKindCount) throw ArgError("unknown activation kind " + std::to_string(kind));
    if (kind == kActPowerInt && !(std::fabs(exponent) < 2147483648.f && std::floor(exponent) == exponent))
      throw ArgError("power_int: exponent " + std::to_string(exponent) + " is not an int32");
    size_ = elements(checked_shape(shape, shape.size(), "shape"));
    g_ = ActArgs{nullptr, nullptr, nullptr, 0, kind, alpha, beta, lo, hi, exponent};
    if (kind != kActPrelu) {
      set_operands({{shape}}, {{shape}});
      return;
    }
    const int64_t slopes = elements(checked_shape(slope_shape, slope_shape.size(), "slope_shape"));
    shared_ = channel_shared || slopes == 1;
    g_.channels = shape.empty() ? 1 : shape.back();
    if (slopes == 0 || (!shared_ && slopes != g_.channels))
      throw ArgError("slope_shape: " + std::to_string(slopes) + " values for " + std::to_string(g_.channels) +
                     " channels");
    if (!shared_) {
      // With few channels a per-channel segment is a few lanes: read the slope tiled to a period
      // of whole vectors (a multiple of 16 floats, every tier's lanes), up to kMaxPeriod floats.
      const int64_t period = std::lcm(g_.channels, int64_t{16});
      if (period <= kMaxPeriod) {
        period_ = period;
        while (period_ * 2 <= kMaxPeriod) period_ *= 2;
      }
    }
    set_operands({{shape}, {slope_shape}}, {{shape}});
  }

  void run(const void* const* in, void* const* out) const override {
    ActArgs g = g_;
    g.x = static_cast<const float*>(in[0]);
    g.y = static_cast<float*>(out[0]);
    if (g.kind == kActPrelu) {
      const float* slope = static_cast<const float*>(in[1]);
      if (shared_)
        g.alpha = slope[0];
      else
        g.slope = slope;
    }
    float tiled[kMaxPeriod];
    if (g.slope && period_) {
      for (int64_t i = 0; i < period_; ++i) tiled[i] = g.slope[i % g.channels];
      g.slope = tiled;
      g.channels = period_;  // x's channel at element e is still (e % period_) % channels
    }
    // 8K elements per chunk: the exp-based kinds cost ~10 ns a vector, so a chunk outweighs a
    // thread hand-off.
    parallel_for(size_, 8192, [&](int64_t e0, int64_t e1) { fn_(g, e0, e1); });
  }
  const char* name() const override { return "activation"; }
  // This activation as a producer's post-op. PReLU reads its slope from an input at run time;
  // fused, it takes a copy of `slope` (a constant input: the slopes it needs), tiled as run() tiles it.
  PostOp post_op(const py::array_t<float, py::array::c_style | py::array::forcecast>& slope) const {
    PostOp::Stage st;
    st.fn = fn_;
    st.g = g_;
    if (g_.kind == kActPrelu) {
      if (slope.size() < (shared_ ? 1 : g_.channels))
        throw ArgError("slope: " + std::to_string(slope.size()) + " values for " + std::to_string(g_.channels) +
                       " channels");
      const float* s = slope.data();
      if (shared_) {
        st.g.alpha = s[0];
      } else {
        const int64_t n = period_ ? period_ : g_.channels;
        auto tiled = std::make_shared<std::vector<float>>(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) (*tiled)[static_cast<size_t>(i)] = s[i % g_.channels];
        st.g.channels = n;
        st.data = std::move(tiled);
      }
    }
    return PostOp{{std::move(st)}};
  }

 private:
  static constexpr int64_t kMaxPeriod = 256;
  ActivationFn fn_;
  ActArgs g_;
  int64_t size_ = 0;
  bool shared_ = false;
  int64_t period_ = 0;  // the tiled slope's length; 0: the slope as given
};

}  // namespace

MSV0_BIND(m) {
  // The kinds by name, in ActKind order: the op layer's only source of the numbers.
  static const char* const kNames[kActKindCount] = {
      "relu", "relu6", "leaky_relu", "sigmoid", "tanh", "swish", "hswish", "hsigmoid", "hard_tanh", "prelu",
      "elu", "exp", "abs", "neg", "square", "sqrt", "rsqrt", "reciprocal", "log", "power_int", "power",
      "floor", "ceil", "round", "gelu_tanh", "gelu_erf"};
  py::dict kinds;
  for (int32_t k = 0; k < kActKindCount; ++k) kinds[kNames[k]] = k;
  m.attr("ACTIVATION_KINDS") = kinds;
  py::class_<Activation, NativeOp, std::shared_ptr<Activation>>(m, "Activation",
      "y = f(x) on float32 arrays of exactly `shape`; kind (ACTIVATION_KINDS) relu, relu6, leaky_relu (alpha), "
      "sigmoid, tanh (Padé), swish, hswish, hsigmoid, hard_tanh (lo, hi), prelu (a second input of "
      "slope_shape: one value per index of the last dim, or its first for all when channel_shared or "
      "it has one), elu (alpha), exp (e^(x·alpha)·beta), abs, neg, square, sqrt, rsqrt, reciprocal, log, "
      "power_int ((x·alpha + beta)^exponent by repeated squaring; exponent an int32) and power (the same by double "
      "pow), floor, ceil, round (halves away from 0), gelu_tanh (x·sigmoid(((x·x)·alpha + beta)·x)) and gelu_erf "
      "(x·Phi(x) by Abramowitz-Stegun 7.1.26), as the ONNX converter lowers Gelu.")
      .def(py::init<int32_t, const std::vector<int64_t>&, float, float, float, float, float,
                    const std::vector<int64_t>&, bool>(),
           py::arg("kind"), py::arg("shape"), py::arg("alpha") = 0.f, py::arg("beta") = 1.f,
           py::arg("lo") = -INFINITY, py::arg("hi") = INFINITY, py::arg("exponent") = 1.f,
           py::arg("slope_shape") = std::vector<int64_t>{},
           py::arg("channel_shared") = false);
  m.def("with_activation",
        [](const NativeOp& producer, const NativeOp& activation,
           const py::array_t<float, py::array::c_style | py::array::forcecast>& slope) -> std::shared_ptr<NativeOp> {
          const auto* act = dynamic_cast<const Activation*>(&activation);
          if (!act) throw ArgError("activation: expected an Activation object");
          check_feeds(producer, act->inputs()[0].shape, "the activation's input shape");
          return producer.with_post(act->post_op(slope));
        },
        py::arg("producer"), py::arg("activation"), py::arg("slope") = py::array_t<float>(0),
        "A copy of the producer kernel object (sharing its packed weights) that applies the Activation "
        "object's function to each block of output as it writes it, or None where the producer cannot "
        "(kernels other than Conv2D's, FullConnection's and Binary). A PReLU's slope is given here (its values are copied).");
}

}  // namespace msv0
#endif
