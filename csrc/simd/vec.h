// The one place that picks a SIMD header for the ISA pass being compiled: simd/vec_<tier>.h,
// named by the pass's row of runtime/isa_tiers.def. Kernel bodies use only what these headers
// define (VecF, VecI8, VecI32 and the free functions beside them), so each kernel source is
// written once and compiled per tier.
#pragma once
#include <cstdint>

#include "runtime/dispatch.h"

// CMake numbers the passes and dispatch.h the enum, both from the rows of isa_tiers.def: a pass
// whose slot index is not its tier's would fill another tier's slots.
#define MSV0_VEC_TIER_OF(isa) ::msv0::kIsa_##isa
#define MSV0_VEC_TIER(isa) MSV0_VEC_TIER_OF(isa)
static_assert(MSV0_ISA_INDEX == MSV0_VEC_TIER(MSV0_ISA), "kernel pass index differs from enum Isa");

#define MSV0_VEC_STR(x) #x
#define MSV0_VEC_HEADER_OF(isa) MSV0_VEC_STR(simd/vec_##isa.h)
#define MSV0_VEC_HEADER(isa) MSV0_VEC_HEADER_OF(isa)
#include MSV0_VEC_HEADER(MSV0_ISA)
