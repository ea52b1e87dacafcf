// Kernel objects. Each is built once per Session with its weights packed and its operand
// shapes fixed, and runs on raw buffers: a Program calls `run` directly (arena addresses do
// not move), Python calls the same object through NativeOp.__call__, which checks every array
// against the shapes fixed here first. An object takes its kernels from the slots of the ISA
// tier active when it is built, and packs its weights in the layout those slots read.
#pragma once
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace msv0 {

struct PostOp;  // kernels/post_op.h

// One input or output as the kernel was built for it: its exact shape and NumPy type char
// ('f' = float32).
struct Operand {
  std::vector<int64_t> shape;
  char type = 'f';
};

class NativeOp {
 public:
  virtual ~NativeOp() = default;
  // Called with the GIL released and the Session's pool bound; in/out hold one pointer per
  // node input/output, each to a C-contiguous buffer of the operand's shape.
  virtual void run(const void* const* in, void* const* out) const = 0;
  // What this object computes with (an algorithm or kernel family name), for tests and logs.
  virtual const char* name() const = 0;
  // A copy of this object (sharing its packed weights) that applies `post` to each block of its
  // output as it writes it, or null where the kernel cannot.
  virtual std::shared_ptr<NativeOp> with_post(const PostOp&) const { return nullptr; }

  const std::vector<Operand>& inputs() const { return inputs_; }
  const std::vector<Operand>& outputs() const { return outputs_; }

 protected:
  void set_operands(std::vector<Operand> inputs, std::vector<Operand> outputs) {
    inputs_ = std::move(inputs);
    outputs_ = std::move(outputs);
  }

 private:
  std::vector<Operand> inputs_, outputs_;
};

}  // namespace msv0
