// QuantDTypeCast between float32 and int8, elements [e0, e1) of flat arrays (quant_cast.cc):
//   f32 -> i8: q = clamp(round(x·scale + zp), -128, 127), scale being 1/s; ±inf -> 127, NaN -> 0
//   i8 -> f32: y = float(q − zp) · scale
#pragma once
#include "kernels/kernel.h"

namespace msv0 {

enum QuantCastKind : int32_t { kQuantizeS8 = 0, kDequantizeS8 = 1 };

struct QuantCastArgs {
  const void* x;
  void* y;
  int64_t size;
  int32_t kind;
  float scale;  // inv_scale (1.0f / scale, as r1.1 forms it) when quantizing
  float zp_f;   // zp as float, the quantize addend
  int32_t zp;
};

using QuantCastFn = void (*)(const QuantCastArgs&, int64_t e0, int64_t e1);

#if MSV0_ONCE
// The slot table, defined by quant_cast.cc's binding pass.
KernelSlots<QuantCastFn>& quant_cast_slots();

// The dynamically quantized kernels' input (gemm_s8.cc, conv2d_s8.cc): `size` float32 uint8
// codes into dst as codes − 128, and the codes' zero point (one float32) returned as zp − 128,
// so that the int8 differences equal codes − zp. The cast's clamp (and NaN -> 0) keeps any
// other value a defined int8.
inline int8_t codes_to_s8(const void* codes, int64_t size, const void* zp, int8_t* dst) {
  const QuantCastFn cast = MSV0_DISPATCH(quant_cast);
  const QuantCastArgs x{codes, dst, size, kQuantizeS8, 1.f, -128.f, -128};
  parallel_for(size, 16384, [&](int64_t e0, int64_t e1) { cast(x, e0, e1); });
  int8_t z;
  cast(QuantCastArgs{zp, &z, 1, kQuantizeS8, 1.f, -128.f, -128}, 0, 1);
  return z;
}
#endif

}  // namespace msv0
