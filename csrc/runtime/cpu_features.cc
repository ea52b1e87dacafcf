// ISA detection, done once: CPUID feature bits and the OS's saved-register state (XCR0) on
// x86, HWCAP on aarch64. MSV0_ISA=<tier> in the environment caps the choice at import.
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "runtime/dispatch.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <cpuid.h>
#elif defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#endif

namespace msv0 {
namespace {

#if defined(__x86_64__) || defined(_M_X64)
uint64_t xgetbv0() {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}

int detect() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return kScalar;
  const bool osxsave = c & (1u << 27), fma = c & (1u << 12), f16c = c & (1u << 29);
  if (!osxsave) return kScalar;
  const uint64_t xcr0 = xgetbv0();
  const bool os_avx = (xcr0 & 0x6) == 0x6;             // XMM + YMM state saved
  const bool os_avx512 = (xcr0 & 0xe6) == 0xe6;        // + opmask, ZMM_Hi256, Hi16_ZMM
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return kScalar;
  const bool avx2 = b & (1u << 5);
  const bool avx512 = (b & (1u << 16)) && (b & (1u << 17)) && (b & (1u << 30)) && (b & (1u << 31));
  const bool vnni = c & (1u << 11);
  if (!(os_avx && avx2 && fma && f16c)) return kScalar;
  if (!(os_avx512 && avx512)) return kAvx2;
  return vnni ? kAvx512Vnni : kAvx512;
}
const char* const kNames[kIsaCount] = {"scalar", "avx2", "avx512", "avx512vnni"};
#elif defined(__aarch64__)
int detect() {
#if defined(__linux__)
  return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) ? kNeonDot : kNeon;
#else
  return kNeon;
#endif
}
const char* const kNames[kIsaCount] = {"scalar", "neon", "neondot"};
#else
int detect() { return kScalar; }
const char* const kNames[kIsaCount] = {"scalar"};
#endif

int initial_cap(int detected) {
  const char* env = std::getenv("MSV0_ISA");
  if (!env || !*env) return detected;
  for (int i = 0; i < kIsaCount; ++i)
    if (std::strcmp(env, kNames[i]) == 0) return i < detected ? i : detected;
  return detected;  // an unknown name must not disable kernels; msv0.isa() shows the result
}

const int g_detected = detect();
std::atomic<int> g_active{initial_cap(g_detected)};

}  // namespace

const char* isa_name(int isa) { return isa >= 0 && isa < kIsaCount ? kNames[isa] : "?"; }
int detected_isa() { return g_detected; }
int active_isa() { return g_active.load(std::memory_order_relaxed); }
void set_isa_cap(int isa) { g_active.store(isa < g_detected ? isa : g_detected); }

}  // namespace msv0
