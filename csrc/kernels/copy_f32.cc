// Data movement on float32 as strided boxes: each move copies a box of an input (any strides,
// negative ones included) into a box of the output, or fills an output box with a value. Pad,
// Concat, Slice, StridedSlice and Transpose are lists of such moves (python/msv0/ops/copy_moves.py).
// Dims that are contiguous in both source and destination are merged when the object is built,
// so a Concat along channels copies whole runs; the innermost dim of each move is its row.
#include "kernels/kernel.h"

namespace msv0 {

constexpr int kCopyMaxRank = 8;
// Rows of a transposing move copied together (one 64-byte line of source floats).
constexpr int64_t kCopyBlock = 16;

struct CopyMove {
  int32_t input;  // which input, or -1 to fill with `value`
  float value;
  int32_t rank;  // >= 1 after merging
  int64_t src, dst;  // element offsets of the box's first element
  int64_t shape[kCopyMaxRank], src_stride[kCopyMaxRank], dst_stride[kCopyMaxRank];
  int64_t first_row;  // rows of the moves before this one
};

struct CopyArgs {
  const float* const* in;
  float* y;
  const CopyMove* moves;
  int64_t count;
};

// Rows [r0, r1) of all moves together (each move's rows in order).
using CopyFn = void (*)(const CopyArgs&, int64_t r0, int64_t r1);
MSV0_DECLARE(copy_f32, CopyFn)

}  // namespace msv0

#if !MSV0_ONCE
namespace msv0 {
namespace MSV0_ISA {

void copy_f32(const CopyArgs& a, int64_t r0, int64_t r1) {
  int64_t m = 0;
  while (m + 1 < a.count && a.moves[m + 1].first_row <= r0) ++m;
  for (int64_t r = r0; r < r1;) {
    const CopyMove& mv = a.moves[m];
    const int64_t last = mv.rank - 1, len = mv.shape[last];
    int64_t rows = 1;
    for (int32_t d = 0; d < last; ++d) rows *= mv.shape[d];
    const int64_t end = min_i(r1, mv.first_row + rows);
    for (; r < end; ++r) {
      int64_t rest = r - mv.first_row, src = mv.src, dst = mv.dst;
      for (int32_t d = last - 1; d >= 0; --d) {
        const int64_t i = rest % mv.shape[d];
        rest /= mv.shape[d];
        src += i * mv.src_stride[d];
        dst += i * mv.dst_stride[d];
      }
      float* y = a.y + dst;
      const int64_t ds = mv.dst_stride[last];
      if (mv.input < 0) {
        for (int64_t i = 0; i < len; ++i) y[i * ds] = mv.value;
        continue;
      }
      const float* x = a.in[mv.input] + src;
      const int64_t ss = mv.src_stride[last];
      if (ss == 1 && ds == 1) {
        __builtin_memcpy(y, x, static_cast<size_t>(len) * sizeof(float));
      } else if (ds == 1 && last > 0 && mv.src_stride[last - 1] == 1) {
        // A transpose: the next rows start at the next source elements. Copied one by one, each
        // row would read one float per source line; a block of rows uses every line it reads.
        const int64_t inner = mv.shape[last - 1], step = mv.dst_stride[last - 1];
        const int64_t block = min_i(kCopyBlock, min_i(end - r, inner - (r - mv.first_row) % inner));
        for (int64_t i0 = 0; i0 < len; i0 += kCopyBlock)
          for (int64_t k = 0; k < block; ++k)
            for (int64_t i = i0; i < min_i(len, i0 + kCopyBlock); ++i) y[k * step + i] = x[i * ss + k];
        r += block - 1;
      } else {
        for (int64_t i = 0; i < len; ++i) y[i * ds] = x[i * ss];
      }
    }
    ++m;
  }
}

MSV0_EXPORT(copy_f32)
}  // namespace MSV0_ISA
}  // namespace msv0

#else  // binding pass
#include <string>
#include <tuple>
#include <vector>
#include <pybind11/stl.h>

#include "runtime/native.h"

namespace msv0 {
namespace {

// (input or -1, fill value, src offset, dst offset, shape, src strides, dst strides), in elements.
using MoveSpec = std::tuple<int32_t, float, int64_t, int64_t, std::vector<int64_t>, std::vector<int64_t>,
                            std::vector<int64_t>>;

// The lowest and highest element offsets a box touches.
void box_bounds(int64_t off, const std::vector<int64_t>& shape, const std::vector<int64_t>& stride, int64_t* lo,
                int64_t* hi) {
  *lo = *hi = off;
  for (size_t d = 0; d < shape.size(); ++d) {
    const int64_t span = (shape[d] - 1) * stride[d];
    (span < 0 ? *lo : *hi) += span;
  }
}

class Copy : public NativeOp {
 public:
  Copy(const std::vector<std::vector<int64_t>>& in_shapes, const std::vector<int64_t>& y_shape,
       const std::vector<MoveSpec>& moves)
      : fn_(MSV0_DISPATCH(copy_f32)) {
    std::vector<Operand> ins;
    for (const auto& s : in_shapes) ins.push_back({checked_shape(s, s.size(), "in_shapes")});
    const int64_t y_size = elements(checked_shape(y_shape, y_shape.size(), "y_shape"));
    for (const MoveSpec& spec : moves) add(spec, in_shapes, y_size);
    set_operands(ins, {{y_shape}});
  }

  void run(const void* const* in, void* const* out) const override {
    const CopyArgs a{reinterpret_cast<const float* const*>(in), static_cast<float*>(out[0]), moves_.data(),
                     static_cast<int64_t>(moves_.size())};
    // Rows of at least ~4K floats per chunk on average, so a chunk outweighs a thread hand-off.
    const int64_t grain = rows_ ? 1 + 4096 * rows_ / (floats_ + 1) : 1;
    parallel_for(rows_, grain, [&](int64_t r0, int64_t r1) { fn_(a, r0, r1); });
  }
  const char* name() const override { return "copy"; }

 private:
  void add(const MoveSpec& spec, const std::vector<std::vector<int64_t>>& in_shapes, int64_t y_size) {
    const auto& [input, value, src, dst, shape, src_stride, dst_stride] = spec;
    if (shape.size() != src_stride.size() || shape.size() != dst_stride.size())
      throw ArgError("move: shape and strides differ in length");
    if (input < -1 || input >= static_cast<int32_t>(in_shapes.size())) throw ArgError("move: bad input index");
    for (int64_t d : shape)
      if (d < 0) throw ArgError("move: negative dim");
    if (elements(shape) == 0) return;
    int64_t lo, hi;
    box_bounds(dst, shape, dst_stride, &lo, &hi);
    if (lo < 0 || hi >= y_size) throw ArgError("move: writes outside the output");
    if (input >= 0) {
      box_bounds(src, shape, src_stride, &lo, &hi);
      if (lo < 0 || hi >= elements(in_shapes[input])) throw ArgError("move: reads outside its input");
    }
    // Drop unit dims, then merge a dim into the next where both strides make them one run.
    CopyMove m{input, value, 0, src, dst, {}, {}, {}, rows_};
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] == 1) continue;
      const int32_t k = m.rank;
      if (k && m.src_stride[k - 1] == src_stride[d] * shape[d] && m.dst_stride[k - 1] == dst_stride[d] * shape[d]) {
        m.shape[k - 1] *= shape[d];
        m.src_stride[k - 1] = src_stride[d];
        m.dst_stride[k - 1] = dst_stride[d];
        continue;
      }
      if (k == kCopyMaxRank) throw ArgError("move: more than 8 dims after merging");
      m.shape[k] = shape[d];
      m.src_stride[k] = src_stride[d];
      m.dst_stride[k] = dst_stride[d];
      m.rank = k + 1;
    }
    if (m.rank == 0) {  // one element
      m.rank = 1;
      m.shape[0] = m.src_stride[0] = m.dst_stride[0] = 1;
    }
    rows_ += elements(shape) / m.shape[m.rank - 1];
    floats_ += elements(shape);
    moves_.push_back(m);
  }

  CopyFn fn_;
  std::vector<CopyMove> moves_;
  int64_t rows_ = 0, floats_ = 0;
};

}  // namespace

MSV0_BIND(m) {
  py::class_<Copy, NativeOp, std::shared_ptr<Copy>>(m, "Copy",
      "float32 data movement: y of y_shape from inputs of in_shapes by `moves`, each (input or -1 to fill, "
      "fill value, src offset, dst offset, shape, src strides, dst strides) in elements; every move "
      "is bounds-checked here.")
      .def(py::init<const std::vector<std::vector<int64_t>>&, const std::vector<int64_t>&,
                    const std::vector<MoveSpec>&>(),
           py::arg("in_shapes"), py::arg("y_shape"), py::arg("moves"));
}

}  // namespace msv0
#endif
