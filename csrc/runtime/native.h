// Kernel objects that a Program can run without returning to Python between steps. Each is
// built at Session planning with its weights packed and its shapes fixed, and reads and
// writes raw buffers the Program binds once (arena addresses do not move).
#pragma once
#include <memory>

namespace msv0 {

class NativeOp {
 public:
  virtual ~NativeOp() = default;
  // Called with the GIL released and the Session's pool bound; in/out hold one pointer per
  // node input/output, each to a C-contiguous buffer of the shape fixed at construction.
  virtual void run(const void* const* in, void* const* out) const = 0;
};

}  // namespace msv0
