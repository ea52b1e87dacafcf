// ln x on VecF lanes for the ISA passes of kernel files: within ~1 ulp of the correctly rounded
// result over the whole float range (tests/ops/test_unary.py measures it against float64 on
// every tier); −inf for ±0, NaN for x < 0 and NaN, +inf for +inf.
#pragma once
#include "kernels/kernel.h"

#if !MSV0_ONCE
namespace msv0 {
namespace MSV0_ISA {

inline VecF log_f(VecF x) {
  const VecF one = VecF::splat(1.f), zero = VecF::zero();
  // Subnormals scaled by 2^23 into the normal range, their exponent lowered to match.
  const VecF tiny = VecF::splat(1.17549435e-38f);
  const VecF xs = select_lt(x, tiny, x * VecF::splat(8388608.f), x);
  VecF e = select_lt(x, tiny, VecF::splat(-23.f), zero);
  // x = m·2^k with m in [1, 2), then m in [√½, √2) so that f = m − 1 is small either side of 0.
  const VecI32 b = bits(xs);
  e = e + to_f32(shift_right(b, 23) - VecI32::splat(127));
  VecF m = from_bits((b & VecI32::splat(0x007FFFFF)) + VecI32::splat(0x3F800000));
  const VecF sqrt2 = VecF::splat(1.41421356f);
  e = select_lt(sqrt2, m, e + one, e);
  m = select_lt(sqrt2, m, m * VecF::splat(0.5f), m);
  const VecF f = m - one;
  // ln(1 + f) = f − f²/2 + f³·p(f) on [√½ − 1, √2 − 1] (Cephes logf's coefficients).
  VecF p = VecF::splat(7.0376836292e-2f);
  p = fmadd(p, f, VecF::splat(-1.1514610310e-1f));
  p = fmadd(p, f, VecF::splat(1.1676998740e-1f));
  p = fmadd(p, f, VecF::splat(-1.2420140846e-1f));
  p = fmadd(p, f, VecF::splat(1.4249322787e-1f));
  p = fmadd(p, f, VecF::splat(-1.6668057665e-1f));
  p = fmadd(p, f, VecF::splat(2.0000714765e-1f));
  p = fmadd(p, f, VecF::splat(-2.4999993993e-1f));
  p = fmadd(p, f, VecF::splat(3.3333331174e-1f));
  const VecF f2 = f * f;
  // e·ln2 in two parts; the first has few bits, so e·ln2_hi is exact, and is added last.
  VecF y = fmadd(p * f, f2, e * VecF::splat(-2.12194440e-4f));
  y = fmadd(f2, VecF::splat(-0.5f), y);
  y = fmadd(e, VecF::splat(0.693359375f), f + y);
  // +inf and NaN give themselves; ±0 gives −inf, a negative NaN.
  y = select_lt(x, VecF::splat(INFINITY), y, x);
  y = select_le(x, zero, VecF::splat(-INFINITY), y);
  return select_lt(x, zero, VecF::splat(NAN), y);
}

}  // namespace MSV0_ISA
}  // namespace msv0
#endif
