// The one place that picks a SIMD header for the ISA pass being compiled. Kernel bodies use
// only what these headers define (VecF and the free functions beside it), so each kernel
// source is written once and compiled per tier.
#pragma once
#include <cstdint>

#if MSV0_ISA_INDEX == 0
#include "simd/vec_scalar.h"
#elif defined(__AVX512F__)
#include "simd/vec_avx512.h"
#elif defined(__AVX2__)
#include "simd/vec_avx2.h"
#elif defined(__ARM_NEON)
#include "simd/vec_neon.h"
#else
#error "no SIMD header for this ISA pass"
#endif
