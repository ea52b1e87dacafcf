// e^x and e^x − 1 on VecF lanes for the ISA passes of kernel files: within ~1 ulp over the
// whole float range (tests/ops/test_activation.py measures it against float64 on every tier).
#pragma once
#include "kernels/kernel.h"

#if !MSV0_ONCE
namespace msv0 {
namespace MSV0_ISA {

// 2^n for integer lanes n in [-252, 254], as two factors of normal range: e·2^n then rounds
// once, also when the result is subnormal.
inline VecF scale_pow2(VecF e, VecI32 n) {
  const VecI32 n1 = shift_right(n, 1), bias = VecI32::splat(127);
  return e * from_bits(shift_left(n1 + bias, 23)) * from_bits(shift_left(n - n1 + bias, 23));
}

// x = n·ln2 + r with |r| <= ln2/2 (n an integer, also as int lanes); e^r − 1 on that interval
// by a degree-7 polynomial (Cephes expf's coefficients), r + r²·p(r).
struct Reduced {
  VecF em1;
  VecI32 n;
};

inline Reduced reduce_exp(VecF x) {
  const VecF magic = VecF::splat(12582912.f);  // 1.5·2^23: the sum rounds to an integer in the low bits
  const VecF k = fmadd(x, VecF::splat(1.44269504088896341f), magic);
  const VecF n = k - magic;
  // ln2 in two parts; the first has 9 trailing zero bits, so n·ln2_hi is exact for |n| < 2^9.
  VecF r = fmadd(n, VecF::splat(-0.693145751953125f), x);
  r = fmadd(n, VecF::splat(-1.428606765330187e-6f), r);
  VecF p = VecF::splat(1.9875691500e-4f);
  p = fmadd(p, r, VecF::splat(1.3981999507e-3f));
  p = fmadd(p, r, VecF::splat(8.3334519073e-3f));
  p = fmadd(p, r, VecF::splat(4.1665795894e-2f));
  p = fmadd(p, r, VecF::splat(1.6666665459e-1f));
  p = fmadd(p, r, VecF::splat(5.0000001201e-1f));
  return {fmadd(p, r * r, r), bits(k) - bits(magic)};
}

// e^x: +inf above ~88.72, 0 below ~-103.97 (subnormals in between), NaN for NaN. The clamp's
// max/min pass NaN through (their second operand wins when unordered).
inline VecF exp_f(VecF x) {
  const VecF one = VecF::splat(1.f);
  const Reduced t = reduce_exp(min(VecF::splat(89.f), max(VecF::splat(-104.f), x)));
  return scale_pow2(t.em1 + one, t.n);
}

// e^x − 1 for x <= 0 (callers mask x > 0): 2^n·(e^r − 1) + (2^n − 1), which keeps e^r − 1's
// relative accuracy near 0, where n = 0. Below −87 the result is −1 in float anyway.
inline VecF expm1_neg(VecF x) {
  const Reduced t = reduce_exp(min(VecF::zero(), max(VecF::splat(-87.f), x)));
  const VecF s = scale_pow2(VecF::splat(1.f), t.n);
  return fmadd(s, t.em1, s - VecF::splat(1.f));
}
}  // namespace MSV0_ISA
}  // namespace msv0
#endif
