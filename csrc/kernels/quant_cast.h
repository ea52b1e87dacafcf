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
#endif

}  // namespace msv0
