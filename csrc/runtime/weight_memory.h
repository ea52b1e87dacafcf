// Memory for what a Session writes once and keeps: packed weights (WeightVector) and arenas
// (weight_memory.cc binds `_core.arena`). Packing writes every byte of tens of MiB once per
// Session, and a first write to a 4 KiB page costs a fault, about 2.5 us on this project's VMs
// (ResNet-50's Session took 41 000 of them, 100 of its 140 ms); a transparent huge page takes one
// fault per 2 MiB. So while a WeightPool is open on a thread (Session opens one while it builds
// kernel objects), WeightVector storage comes from large huge-page-advised mappings there, one
// allocation after the other; elsewhere from the heap.
#pragma once
#include <cstddef>
#include <vector>

namespace msv0 {

// bytes of storage, 64-byte aligned; weight_free gives back what it returned. A pool's
// allocation is never reused, but its whole pages go back to the system when it is freed.
void* weight_alloc(size_t bytes);
void weight_free(void* p) noexcept;

// The whole pages inside [p, p + bytes) back to the system (MADV_DONTNEED): anonymous memory
// reads as zeros after, a private file mapping refills from the file.
void release_pages(const void* p, size_t bytes) noexcept;

template <class T>
struct WeightAllocator {
  using value_type = T;
  WeightAllocator() = default;
  template <class U>
  WeightAllocator(const WeightAllocator<U>&) noexcept {}
  T* allocate(size_t n) { return static_cast<T*>(weight_alloc(n * sizeof(T))); }
  void deallocate(T* p, size_t) noexcept { weight_free(p); }
  template <class U>
  bool operator==(const WeightAllocator<U>&) const noexcept { return true; }
  template <class U>
  bool operator!=(const WeightAllocator<U>&) const noexcept { return false; }
};

template <class T>
using WeightVector = std::vector<T, WeightAllocator<T>>;

struct Slabs;  // a pool's mappings (weight_memory.cc)

// Opens a pool on this thread until destroyed (scopes nest; the inner one is current). The
// pool's mappings live until the last allocation from it is freed.
class WeightPool {
 public:
  WeightPool();
  ~WeightPool();
  WeightPool(const WeightPool&) = delete;
  WeightPool& operator=(const WeightPool&) = delete;

 private:
  Slabs* slabs_;
  Slabs* outer_;
};

}  // namespace msv0
