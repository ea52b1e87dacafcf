#include "runtime/weight_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <utility>

#include "runtime/bind.h"

namespace msv0 {
namespace {

// Under AddressSanitizer every buffer comes from the heap, where it sees overruns.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MSV0_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(MSV0_ASAN)
constexpr bool kHeapOnly = true;
#else
constexpr bool kHeapOnly = false;
#endif

constexpr uintptr_t kHuge = uintptr_t{2} << 20;  // the x86-64 and 4 KiB-page arm64 huge page
constexpr size_t kSlabBytes = size_t{32} << 20;  // a pool's mappings: this, or one allocation if larger

// Before each allocation, in its own 64 bytes so that the allocation stays 64-byte aligned.
struct alignas(64) Header {
  Slabs* pool;  // null: from the heap
  size_t bytes;
};

uintptr_t round_up(uintptr_t x, uintptr_t a) { return (x + a - 1) / a * a; }

uintptr_t page_size() {
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  return page;
}

// bytes (whole pages) of zeroed memory starting on a kHuge boundary, its first `huge` bytes
// (whole kHuge ranges) advised to take huge pages.
char* map_aligned(size_t bytes, size_t huge) {
  void* p = mmap(nullptr, bytes + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  const uintptr_t raw = reinterpret_cast<uintptr_t>(p), start = round_up(raw, kHuge);
  if (start > raw) munmap(p, start - raw);
  if (raw + kHuge > start) munmap(reinterpret_cast<void*>(start + bytes), raw + kHuge - start);
#ifdef MADV_HUGEPAGE
  if (huge) madvise(reinterpret_cast<void*>(start), huge, MADV_HUGEPAGE);  // advice: THP may be off
#endif
  return reinterpret_cast<char*>(start);
}

}  // namespace

void release_pages(const void* p, size_t bytes) noexcept {
  const uintptr_t lo = round_up(reinterpret_cast<uintptr_t>(p), page_size());
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(p) + bytes) / page_size() * page_size();
  if (lo < hi) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

// A pool: mappings handed out front to back, and freed together when the last allocation is.
struct Slabs {
  std::atomic<int64_t> refs{1};  // live allocations, + 1 while the pool is open
  std::vector<std::pair<char*, size_t>> maps;
  char* next = nullptr;  // the free rest of the last mapping
  char* end = nullptr;

  void* alloc(size_t bytes) {
    const size_t need = sizeof(Header) + round_up(bytes, 64);
    if (static_cast<size_t>(end - next) < need) {
      seal();
      const size_t size = std::max(kSlabBytes, static_cast<size_t>(round_up(need, kHuge)));
      next = map_aligned(size, size);
      end = next + size;
      maps.emplace_back(next, size);
    }
    Header* h = new (next) Header{this, bytes};
    next += need;
    refs.fetch_add(1, std::memory_order_relaxed);
    return h + 1;
  }

  // The unused rest of the last mapping: the part of its last huge page the allocations left
  // back to the system, the huge pages after it unmapped.
  void seal() {
    if (next == nullptr) return;
    const uintptr_t used = reinterpret_cast<uintptr_t>(next), stop = reinterpret_cast<uintptr_t>(end);
    const uintptr_t cut = std::min(round_up(used, kHuge), stop);
    release_pages(next, cut - used);
    if (cut < stop) {
      munmap(reinterpret_cast<void*>(cut), stop - cut);
      maps.back().second = cut - reinterpret_cast<uintptr_t>(maps.back().first);
    }
    next = end = nullptr;
  }

  void unref() {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    for (const auto& [p, n] : maps) munmap(p, n);
    delete this;
  }
};

namespace {
thread_local Slabs* open_pool = nullptr;
}  // namespace

void* weight_alloc(size_t bytes) {
  if (bytes > SIZE_MAX / 4) throw std::bad_alloc();  // the roundings below cannot wrap
  if (open_pool && !kHeapOnly) return open_pool->alloc(bytes);
  void* base = std::aligned_alloc(alignof(Header), sizeof(Header) + round_up(bytes, alignof(Header)));
  if (base == nullptr) throw std::bad_alloc();
  return new (base) Header{nullptr, bytes} + 1;
}

void weight_free(void* p) noexcept {
  if (p == nullptr) return;
  Header* h = static_cast<Header*>(p) - 1;
  if (h->pool == nullptr) return std::free(h);
  release_pages(p, h->bytes);
  h->pool->unref();
}

WeightPool::WeightPool() : slabs_(new Slabs), outer_(open_pool) { open_pool = slabs_; }

WeightPool::~WeightPool() {
  slabs_->seal();
  open_pool = outer_;
  slabs_->unref();
}

namespace {

// Zeroed bytes for a plan's arena in a mapping of their own, starting on a huge-page boundary,
// its whole huge-page ranges advised to take huge pages (the first run writes them all).
py::array arena(int64_t nbytes) {
  if (nbytes < 0) throw ArgError("arena: negative size");
  const size_t bytes = round_up(static_cast<uintptr_t>(std::max<int64_t>(nbytes, 1)), page_size());
  if (kHeapOnly) {
    void* p = std::aligned_alloc(page_size(), bytes);
    if (p == nullptr) throw std::bad_alloc();
    py::capsule owner(p, [](void* q) { std::free(q); });
    return py::array(py::dtype::of<uint8_t>(), {nbytes}, {int64_t{1}}, static_cast<uint8_t*>(std::memset(p, 0, bytes)), owner);
  }
  char* p = map_aligned(bytes, bytes / kHuge * kHuge);
  py::capsule owner(new std::pair<char*, size_t>(p, bytes), [](void* m) {
    auto* map = static_cast<std::pair<char*, size_t>*>(m);
    munmap(map->first, map->second);
    delete map;
  });
  return py::array(py::dtype::of<uint8_t>(), {nbytes}, {int64_t{1}}, p, owner);
}

// Python's view of a pool: `with _core.WeightPool():` around building kernel objects.
struct PoolScope {
  std::unique_ptr<WeightPool> pool;
};

}  // namespace

MSV0_BIND(m) {
  m.def("arena", &arena, py::arg("nbytes"),
        "nbytes zeroed bytes (uint8) in a mapping of their own, page-aligned, whole 2 MiB ranges in huge pages");
  py::class_<PoolScope>(m, "WeightPool",
                        "While entered (on one thread), the packed weights of kernel objects built there share\n"
                        "huge-page mappings, freed when the last of them is.")
      .def(py::init<>())
      .def("__enter__", [](PoolScope& s) {
        if (s.pool) throw ArgError("WeightPool: already entered");
        s.pool = std::make_unique<WeightPool>();
      })
      .def("__exit__", [](PoolScope& s, const py::args&) { s.pool.reset(); });
}

}  // namespace msv0
