// ISA detection, done once: CPUID feature bits and the OS's saved-register state (XCR0) on
// x86, HWCAP on aarch64, matched against the requirements of the rows of isa_tiers.def.
// MSV0_ISA=<tier> in the environment caps the choice at import.
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "runtime/dispatch.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#elif defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1 << 1)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#ifndef HWCAP_FPHP
#define HWCAP_FPHP (1 << 9)
#endif
#ifndef HWCAP_ASIMDHP
#define HWCAP_ASIMDHP (1 << 10)
#endif
#endif

namespace msv0 {
namespace {

// What a tier's `needs` column names. A bit is set only when the CPU has the instructions
// and, for register state the OS must save on context switches, the OS has enabled it.
enum Feature : uint32_t {
  kOsYmm = 1u << 0,     // XCR0: XMM and YMM state
  kOsZmm = 1u << 1,     // XCR0: opmask, ZMM_Hi256 and Hi16_ZMM state
  kAvx2 = 1u << 2,
  kFma = 1u << 3,
  kF16c = 1u << 4,
  kAvx512 = 1u << 5,    // F, DQ, BW and VL
  kVnni = 1u << 6,      // AVX512_VNNI
  kAsimd = 1u << 7,
  kAsimdDot = 1u << 8,  // SDOT/UDOT
};

#if defined(__x86_64__) || defined(_M_X64)
uint64_t xgetbv0() {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}

uint32_t features() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
  uint32_t f = 0;
  if (c & (1u << 12)) f |= kFma;
  if (c & (1u << 29)) f |= kF16c;
  if (c & (1u << 27)) {  // OSXSAVE: xgetbv is available
    const uint64_t xcr0 = xgetbv0();
    if ((xcr0 & 0x6) == 0x6) f |= kOsYmm;
    if ((xcr0 & 0xe6) == 0xe6) f |= kOsZmm;
  }
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
  if (b & (1u << 5)) f |= kAvx2;
  if ((b & (1u << 16)) && (b & (1u << 17)) && (b & (1u << 30)) && (b & (1u << 31))) f |= kAvx512;
  if (c & (1u << 11)) f |= kVnni;
  return f;
}
#elif defined(__aarch64__)
uint32_t features() {
#if defined(__linux__)
  const unsigned long hw = getauxval(AT_HWCAP);
  return ((hw & HWCAP_ASIMD) ? kAsimd : 0u) | ((hw & HWCAP_ASIMDDP) ? kAsimdDot : 0u);
#else
  return kAsimd;  // AdvSIMD is part of every AArch64 profile this builds for
#endif
}
#else
uint32_t features() { return 0; }
#endif

struct Tier {
  const char* name;
  uint32_t needs;
};
const Tier kTiers[kIsaCount] = {
#define MSV0_TIER(name, arch, flags, needs) MSV0_TIER_ON_##arch({#name, needs}, )
#include "runtime/isa_tiers.def"
#undef MSV0_TIER
};

// The last tier whose requirements all hold, stopping at the first that fails (rows are in
// increasing order, so a tier above a failed one is not usable either).
int detect() {
  const uint32_t have = features();
  int best = 0;
  for (int i = 1; i < kIsaCount && (kTiers[i].needs & ~have) == 0; ++i) best = i;
  return best;
}

int initial_cap(int detected) {
  const char* env = std::getenv("MSV0_ISA");
  if (!env || !*env) return detected;
  for (int i = 0; i < kIsaCount; ++i)
    if (std::strcmp(env, kTiers[i].name) == 0) return i < detected ? i : detected;
  return detected;  // an unknown name must not disable kernels; msv0.isa() shows the result
}

const int g_detected = detect();
std::atomic<int> g_active{initial_cap(g_detected)};
std::atomic<bool> g_amx_enabled{true};  // set_amx_enabled(false): tests and benchmarks of the plain slots

}  // namespace

const char* isa_name(int isa) { return isa >= 0 && isa < kIsaCount ? kTiers[isa].name : "?"; }

// Features of one kernel (gemm_bf16.cc), not of a tier. AVX512-BF16: CPUID leaf 7 subleaf 1,
// EAX bit 5; its register state is the AVX-512 tiers' (ZMM), which that kernel's tier needs.
bool cpu_has_avx512bf16() {
#if defined(__x86_64__) || defined(_M_X64)
  unsigned a, b, c, d;
  return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5));
#else
  return false;
#endif
}

// AVX512-VBMI (byte permutes; CPUID leaf 7 ECX bit 1): lookup_s8.cc's avx512vnni slot.
bool cpu_has_avx512vbmi() {
#if defined(__x86_64__) || defined(_M_X64)
  unsigned a, b, c, d;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << 1));
#else
  return false;
#endif
}

// FP16 arithmetic (ARMv8.2-A FP16, scalar and AdvSIMD): gemm_f16.cc's kernel, on the aarch64
// tiers.
bool cpu_has_fp16_arith() {
#if defined(__aarch64__) && defined(__linux__)
  const unsigned long hw = getauxval(AT_HWCAP);
  return (hw & HWCAP_FPHP) && (hw & HWCAP_ASIMDHP);
#else
  return false;
#endif
}

// AMX-TILE and the unit's instructions (CPUID leaf 7 EDX bit 24; AMX-BF16 bit 22, AMX-INT8
// bit 25), the tile state enabled in XCR0 (bits 17, 18), and Linux's per-process permission to
// use it (ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA), asked for on the first call only: the
// first AMX slot a kernel object configures, not the import.
bool amx_usable(Amx unit) {
#if (defined(__x86_64__) || defined(_M_X64)) && defined(__linux__)
  if (!g_amx_enabled.load(std::memory_order_relaxed)) return false;
  static const uint32_t edx = [] {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return 0u;  // OSXSAVE
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24))) return 0u;
    if ((xgetbv0() & 0x60000) != 0x60000) return 0u;
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0 ? d : 0u;
  }();
  return edx & (1u << (unit == Amx::kBf16 ? 22 : 25));
#else
  (void)unit;
  return false;
#endif
}
bool amx_enabled() { return g_amx_enabled.load(std::memory_order_relaxed); }
void set_amx_enabled(bool on) { g_amx_enabled.store(on); }
int detected_isa() { return g_detected; }
int active_isa() { return g_active.load(std::memory_order_relaxed); }
void set_isa_cap(int isa) { g_active.store(isa < g_detected ? isa : g_detected); }

}  // namespace msv0
