// The element-wise steps a float kernel object may run on each block of output it has just
// written, while the block is in cache (binding pass only): fused Activation steps and Binary
// steps whose other operand is a constant (a Maximum with one value after a LeakyReLU) or a
// tensor of the output's shape that the run passes (a residual Add after a conv), in the order
// the graph ran them. Results equal the steps run apart: the same kernels on the same values.
#pragma once
#if MSV0_ONCE
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/activation_f32.h"
#include "kernels/binary_f32.h"
#include "runtime/native.h"

namespace msv0 {

// Throws unless `producer` writes one float32 output of `shape`, the operand (`what`) that a
// post-op it would run reads: with_activation's and with_binary's check.
inline void check_feeds(const NativeOp& producer, const std::vector<int64_t>& shape, const char* what) {
  if (producer.outputs().size() != 1 || producer.outputs()[0].type != 'f' || producer.outputs()[0].shape != shape)
    throw ArgError(std::string("producer: its output is not ") + what);
}

struct PostOp {
  // An Activation, or (binary set) a Binary with `data` as one operand, or without data the
  // run's operand (apply's r), and the output as the other.
  struct Stage {
    ActivationFn fn = nullptr;
    ActArgs g{};
    BinaryFn binary = nullptr;
    BinaryArgs b{};
    bool data_first = false;  // the other operand is the Binary's first
    std::shared_ptr<const std::vector<float>> data;  // PReLU's per-channel slope, or the constant
  };
  std::vector<Stage> stages;

  explicit operator bool() const { return !stages.empty(); }
  // These stages, then `more`'s.
  PostOp then(const PostOp& more) const {
    PostOp p = *this;
    p.stages.insert(p.stages.end(), more.stages.begin(), more.stages.end());
    return p;
  }
  // y[e] = f(y[e]) for e in [e0, e1) of the whole output y, stage by stage on chunks of
  // kChunk elements: a chain reads each chunk from L1 (callers pass up to a thread's share).
  // r: the operand, of y's shape, of Binary stages without data.
  void apply(float* y, int64_t e0, int64_t e1, const float* r = nullptr) const {
    constexpr int64_t kChunk = 4096;
    for (int64_t c0 = e0; c0 < e1; c0 += kChunk) {
      const int64_t c1 = e1 - c0 > kChunk ? c0 + kChunk : e1;
      for (const Stage& s : stages) {
        if (s.binary) {
          BinaryArgs b = s.b;
          const float* other = s.data ? s.data->data() : r;
          b.a = s.data_first ? other : y;
          b.b = s.data_first ? y : other;
          b.y = y;
          s.binary(b, c0, c1);
        } else {
          ActArgs a = s.g;
          a.x = y;
          a.y = y;
          if (s.data) a.slope = s.data->data();
          s.fn(a, c0, c1);
        }
      }
    }
  }
  // The same on channels [c0, c1) of pixels [p0, p1) of an output with `channels` per pixel.
  void apply_pixels(float* y, int64_t channels, int64_t p0, int64_t p1, int64_t c0, int64_t c1,
                    const float* r = nullptr) const {
    if (c0 == 0 && c1 == channels) return apply(y, p0 * channels, p1 * channels, r);
    for (int64_t p = p0; p < p1; ++p) apply(y, p * channels + c0, p * channels + c1, r);
  }
};

}  // namespace msv0
#endif
