// Kernel slot tables: one function pointer per ISA tier, filled by the per-ISA passes of
// csrc/kernels/*.cc, read through the active tier (CPU features capped by MSV0_ISA / set_isa).
#pragma once
#include <cstdint>

namespace msv0 {

// Tiers in increasing order; each implies the ones below it on its architecture.
#if defined(__aarch64__)
enum Isa : int { kScalar = 0, kNeon = 1, kNeonDot = 2, kIsaCount = 3 };
#else
enum Isa : int { kScalar = 0, kAvx2 = 1, kAvx512 = 2, kAvx512Vnni = 3, kIsaCount = 4 };
#endif

const char* isa_name(int isa);
int detected_isa();          // the best tier this CPU and OS can run
int active_isa();            // min(detected, cap): what dispatch uses now
void set_isa_cap(int isa);   // cap (tests, MSV0_ISA); clamped to detected

template <class Fn>
struct KernelSlots {
  Fn fn[kIsaCount] = {};
  // The best tier at or below the active one that this kernel was built for.
  Fn get() const {
    for (int i = active_isa(); i >= 0; --i)
      if (fn[i]) return fn[i];
    return nullptr;
  }
};

}  // namespace msv0

// MSV0_DECLARE(name, signature) in msv0 namespace scope of a kernel file; the binding pass
// (MSV0_ONCE) defines the slot table, the ISA passes only declare it.
#if MSV0_ONCE
#define MSV0_DECLARE(name, ...)                                   \
  using name##_t = __VA_ARGS__;                                   \
  KernelSlots<name##_t>& name##_slots() {                         \
    static KernelSlots<name##_t> slots;                           \
    return slots;                                                 \
  }
#else
#define MSV0_DECLARE(name, ...) \
  using name##_t = __VA_ARGS__; \
  KernelSlots<name##_t>& name##_slots();
#endif

// In namespace msv0::MSV0_ISA, after the kernel's definition: fills this tier's slot at load.
#define MSV0_EXPORT(name)                                                             \
  [[maybe_unused]] static const bool name##_exported =                                \
      (::msv0::name##_slots().fn[MSV0_ISA_INDEX] = &name, true);

#define MSV0_DISPATCH(name) (::msv0::name##_slots().get())
