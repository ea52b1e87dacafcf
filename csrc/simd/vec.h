// The one place that picks a SIMD header for the ISA pass being compiled: simd/vec_<tier>.h,
// named by the pass's row of runtime/isa_tiers.def. Kernel bodies use only what these headers
// define (VecF, VecI8, VecI32 and the free functions beside them), so each kernel source is
// written once and compiled per tier.
#pragma once
#include <cstdint>

#define MSV0_VEC_STR(x) #x
#define MSV0_VEC_HEADER_OF(isa) MSV0_VEC_STR(simd/vec_##isa.h)
#define MSV0_VEC_HEADER(isa) MSV0_VEC_HEADER_OF(isa)
#include MSV0_VEC_HEADER(MSV0_ISA)
