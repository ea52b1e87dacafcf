// AMX tiles for the avx512vnni pass's AMX slots (gemm_bf16.cc, gemm_s8.cc). AMX is a feature of
// those kernels, not a tier: the includer compiles this header under
// MSV0_TARGET_PUSH("amx-tile,...") (simd/pragmas.h) and its slot is used only where
// amx_usable() (runtime/dispatch.h).
#pragma once
#include "simd/avx512_lanes.h"

namespace msv0 {
namespace MSV0_ISA {

// All eight tiles as 16 rows of 64 bytes (palette 1), the one shape msv0's AMX kernels use.
// Tile registers are per thread and loading a configuration zeroes them, so a kernel call
// configures on entry and releases on exit (then context switches need not save tile data).
// static: the includers compile it under different targets (amx-bf16, amx-int8).
static inline void amx_configure() {
  struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
  } cfg = {};
  cfg.palette = 1;
  for (int t = 0; t < 8; ++t) {
    cfg.rows[t] = 16;
    cfg.colsb[t] = 64;
  }
  _tile_loadconfig(&cfg);
}
static inline void amx_release() { _tile_release(); }

}  // namespace MSV0_ISA
}  // namespace msv0
