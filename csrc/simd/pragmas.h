// Pragmas spelled for both compilers that build msv0: gcc (builds from source) and zig's clang
// (the wheels, scripts/build_wheels.sh), which ignores GCC's target and optimize pragmas.
#pragma once

#define MSV0_PRAGMA(x) _Pragma(#x)
#if defined(__clang__)
// Functions defined from here to MSV0_TARGET_POP may also use the instructions of `features`
// (a string, as in __attribute__((target))): for a kernel's slot filled only where the CPU has them.
#define MSV0_TARGET_PUSH(features) \
  MSV0_PRAGMA(clang attribute push(__attribute__((target(features))), apply_to = function))
#define MSV0_TARGET_POP MSV0_PRAGMA(clang attribute pop)
// No FMA contracted from a separate multiply and add, from here to the end of the file.
#define MSV0_FP_CONTRACT_OFF MSV0_PRAGMA(clang fp contract(off))
#else
#define MSV0_TARGET_PUSH(features) MSV0_PRAGMA(GCC push_options) MSV0_PRAGMA(GCC target(features))
#define MSV0_TARGET_POP MSV0_PRAGMA(GCC pop_options)
#define MSV0_FP_CONTRACT_OFF MSV0_PRAGMA(GCC optimize("fp-contract=off"))
#endif
