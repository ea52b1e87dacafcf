// Kernel slot tables: one function pointer per ISA tier, filled by the per-ISA passes of
// csrc/kernels/*.cc, read through the active tier (CPU features capped by MSV0_ISA / set_isa).
#pragma once
#include <cstdint>

namespace msv0 {

// MSV0_TIER_ON_<arch>(...) expands to its arguments for the rows of runtime/isa_tiers.def that
// this build compiles (arch `any` and the target's), to nothing for the others.
#define MSV0_TIER_ON_any(...) __VA_ARGS__
#if defined(__x86_64__) || defined(_M_X64)
#define MSV0_TIER_ON_x86_64(...) __VA_ARGS__
#else
#define MSV0_TIER_ON_x86_64(...)
#endif
#if defined(__aarch64__)
#define MSV0_TIER_ON_aarch64(...) __VA_ARGS__
#else
#define MSV0_TIER_ON_aarch64(...)
#endif

// This build's tiers in increasing order (isa_tiers.def); each implies the ones below it.
enum Isa : int {
#define MSV0_TIER(name, arch, flags, needs) MSV0_TIER_ON_##arch(kIsa_##name, )
#include "runtime/isa_tiers.def"
#undef MSV0_TIER
  kIsaCount
};

const char* isa_name(int isa);
int detected_isa();          // the best tier this CPU and OS can run
int active_isa();            // min(detected, cap): what dispatch uses now
void set_isa_cap(int isa);   // cap (tests, MSV0_ISA); clamped to detected

// AMX is a feature of a few kernels on the avx512vnni tier, not a tier: those kernels have a
// second slot table, used when the unit is usable (the CPU has it, the OS grants the tile
// state, asked for on the first query, and set_amx_enabled has not turned it off).
enum class Amx { kBf16, kInt8 };
bool amx_usable(Amx unit);
bool amx_enabled();
void set_amx_enabled(bool on);

// A tier's entry is a kernel function pointer, or a kernel family's config struct whose `fn`
// member is that pointer and whose other members (tile sizes, packer) describe what `fn`
// expects, so schedulers read the tile from the slot instead of assuming one tier's.
template <class Fn>
bool slot_filled(Fn* fn) { return fn != nullptr; }
template <class Entry>
bool slot_filled(const Entry& e) { return e.fn != nullptr; }

template <class Entry>
struct KernelSlots {
  Entry entry[kIsaCount] = {};
  // The best tier at or below the active one that this kernel was built for (every kernel
  // file is compiled for the scalar tier, so entry[0] is always filled).
  const Entry& get() const {
    for (int i = active_isa(); i > 0; --i)
      if (slot_filled(entry[i])) return entry[i];
    return entry[0];
  }
};

// The AMX slot of the active tier if it has one and `unit` is usable, else the plain slot.
template <class Entry>
const Entry& amx_or_plain(const KernelSlots<Entry>& amx, Amx unit, const KernelSlots<Entry>& plain) {
  const Entry& a = amx.get();
  return slot_filled(a) && amx_usable(unit) ? a : plain.get();
}

}  // namespace msv0

// MSV0_DECLARE(name, entry type) in msv0 namespace scope of a kernel file; the binding pass
// (MSV0_ONCE) defines the slot table and its filler, the ISA passes only declare them. The
// filler is what copies an entry into the table, so that copy is compiled for the baseline
// CPU: an ISA pass's load-time code runs on every CPU, and the compiler may build or copy a
// config struct with that pass's vector instructions (an AVX-512 broadcast at load killed
// `import msv0` on AVX2 machines).
#if MSV0_ONCE
#define MSV0_DECLARE(name, ...)                                              \
  using name##_t = __VA_ARGS__;                                              \
  KernelSlots<name##_t>& name##_slots() {                                    \
    static KernelSlots<name##_t> slots;                                      \
    return slots;                                                            \
  }                                                                          \
  [[gnu::noinline]] bool name##_fill(int isa, const name##_t& entry) {       \
    name##_slots().entry[isa] = entry;                                       \
    return true;                                                             \
  }
#else
#define MSV0_DECLARE(name, ...)       \
  using name##_t = __VA_ARGS__;       \
  KernelSlots<name##_t>& name##_slots(); \
  bool name##_fill(int isa, const name##_t& entry);
#endif

// In namespace msv0::MSV0_ISA, after the kernel's definition: fills this tier's slot at load,
// with the function itself (MSV0_EXPORT) or with the family's config struct built from the
// braced members that follow the name (MSV0_EXPORT_CONFIG(name, fn, mr, nr, ...)). The config
// is a constant (static data, no code); the load-time code only passes its address.
#define MSV0_EXPORT(name) \
  [[maybe_unused]] static const bool name##_exported = ::msv0::name##_fill(MSV0_ISA_INDEX, &name);
#define MSV0_EXPORT_CONFIG(name, ...)                                       \
  constexpr ::msv0::name##_t name##_config{__VA_ARGS__};                    \
  [[maybe_unused]] static const bool name##_exported = ::msv0::name##_fill(MSV0_ISA_INDEX, name##_config);

#define MSV0_DISPATCH(name) (::msv0::name##_slots().get())
