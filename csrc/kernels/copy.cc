// Data movement on float32 or int8 as strided boxes: each move copies a box of an input (any
// strides, negative ones included) into a box of an output, or fills an output box with a value.
// Pad, Concat, Split, Slice, StridedSlice, Transpose and DepthToSpace are lists of such moves
// (python/msv0/ops/copy_moves.py); int8 models' layout ops move their bytes here too.
// Dims that are contiguous in both source and destination are merged when the object is built,
// so a Concat along channels copies whole runs; the innermost dim of each move is its row.
#include "kernels/kernel.h"

namespace msv0 {

constexpr int kCopyMaxRank = 8;
// Rows of a transposing move copied together (a 64-byte line of source floats; a quarter of
// one of bytes).
constexpr int64_t kCopyBlock = 16;

struct CopyMove {
  int32_t input;  // which input, or -1 to fill with `value`
  int32_t output;
  float value;
  int32_t rank;  // >= 1 after merging
  int64_t src, dst;  // element offsets of the box's first element
  int64_t shape[kCopyMaxRank], src_stride[kCopyMaxRank], dst_stride[kCopyMaxRank];
  int64_t rows;  // the product of the outer dims: rows of shape[rank - 1] elements
};

struct CopyArgs {
  const void* const* in;  // float32 or int8 arrays, as the slot reads them
  void* const* out;
  const CopyMove* moves;
  int64_t count;
};

// Part `part` of `parts`: the same share of every move's rows, so that a thread writes one
// region of the output (a Pad's rows and their padding, a Concat's slices of the same pixels)
// and no cache line another writes (split move after move, a channel Pad ran 8x slower on 2
// threads than on 1).
using CopyFn = void (*)(const CopyArgs&, int64_t part, int64_t parts);
MSV0_DECLARE(copy_f32, CopyFn)
MSV0_DECLARE(copy_s8, CopyFn)

}  // namespace msv0

#if !MSV0_ONCE
namespace msv0 {
namespace MSV0_ISA {

namespace {

// A row's len floats from x (or `value` where x is null) to y, both contiguous: whole vectors
// and a tail. libc's memcpy costs a call per row, most of a channel Pad's 24-float rows.
void copy_run(float* y, const float* x, float value, int64_t len) {
  const VecF v = VecF::splat(value);
  int64_t i = 0;
  for (; i + VecF::kLanes <= len; i += VecF::kLanes) (x ? VecF::load(x + i) : v).store(y + i);
  if (i < len) (x ? VecF::load_tail(x + i, len - i) : v).store_tail(y + i, len - i);
}

// int8: the value is an integer in [-128, 127] (the binding checks it).
void copy_run(int8_t* y, const int8_t* x, float value, int64_t len) {
  if (x)
    __builtin_memcpy(y, x, static_cast<size_t>(len));
  else
    __builtin_memset(y, static_cast<int8_t>(value), static_cast<size_t>(len));
}

// A move's rows in order, as the offsets of each row's first source and destination element:
// the row's multi-index over the outer dims, stepped like an odometer (a division per dim and
// row was most of a Pad of short rows).
struct RowCursor {
  const CopyMove& mv;
  int64_t idx[kCopyMaxRank] = {};
  int64_t src, dst;

  RowCursor(const CopyMove& m, int64_t row) : mv(m), src(m.src), dst(m.dst) {
    for (int32_t d = mv.rank - 2; d >= 0; --d) {
      idx[d] = row % mv.shape[d];
      row /= mv.shape[d];
      src += idx[d] * mv.src_stride[d];
      dst += idx[d] * mv.dst_stride[d];
    }
  }

  void next() {
    for (int32_t d = mv.rank - 2; d >= 0; --d) {
      src += mv.src_stride[d];
      dst += mv.dst_stride[d];
      if (++idx[d] < mv.shape[d]) return;
      src -= mv.shape[d] * mv.src_stride[d];
      dst -= mv.shape[d] * mv.dst_stride[d];
      idx[d] = 0;
    }
  }
};

template <class T>
void copy_boxes(const CopyArgs& a, int64_t part, int64_t parts) {
  for (int64_t m = 0; m < a.count; ++m) {
    const CopyMove& mv = a.moves[m];
    const int64_t last = mv.rank - 1, len = mv.shape[last];
    const int64_t end = (part + 1) * mv.rows / parts;
    const int64_t ss = mv.src_stride[last], ds = mv.dst_stride[last];
    int64_t r = part * mv.rows / parts;
    for (RowCursor row(mv, r); r < end; ++r, row.next()) {
      T* y = static_cast<T*>(a.out[mv.output]) + row.dst;
      const T* x = mv.input < 0 ? nullptr : static_cast<const T*>(a.in[mv.input]) + row.src;
      const T value = static_cast<T>(mv.value);
      if (ds == 1 && (!x || ss == 1)) {
        copy_run(y, x, mv.value, len);
      } else if (!x) {
        for (int64_t i = 0; i < len; ++i) y[i * ds] = value;
      } else if (ds == 1 && last > 0 && mv.src_stride[last - 1] == 1) {
        // A transpose: the next rows start at the next source elements. Copied one by one, each
        // row would read one float per source line; a block of rows uses every line it reads.
        const int64_t inner = mv.shape[last - 1], step = mv.dst_stride[last - 1];
        const int64_t block = min_i(kCopyBlock, min_i(end - r, inner - row.idx[last - 1]));
        for (int64_t i0 = 0; i0 < len; i0 += kCopyBlock)
          for (int64_t k = 0; k < block; ++k)
            for (int64_t i = i0; i < min_i(len, i0 + kCopyBlock); ++i) y[k * step + i] = x[i * ss + k];
        for (int64_t k = 1; k < block; ++k, ++r) row.next();
      } else {
        for (int64_t i = 0; i < len; ++i) y[i * ds] = x[i * ss];
      }
    }
  }
}

}  // namespace

void copy_f32(const CopyArgs& a, int64_t part, int64_t parts) { copy_boxes<float>(a, part, parts); }
void copy_s8(const CopyArgs& a, int64_t part, int64_t parts) { copy_boxes<int8_t>(a, part, parts); }

MSV0_EXPORT(copy_f32)
MSV0_EXPORT(copy_s8)
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

// (input or -1, output, fill value, src offset, dst offset, shape, src strides, dst strides), in
// elements.
using MoveSpec = std::tuple<int32_t, int32_t, float, int64_t, int64_t, std::vector<int64_t>, std::vector<int64_t>,
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
  Copy(const std::vector<std::vector<int64_t>>& in_shapes, const std::vector<std::vector<int64_t>>& out_shapes,
       const std::vector<MoveSpec>& moves, char type)
      : type_(type) {
    if (type != 'f' && type != 'b') throw ArgError("type must be 'f' (float32) or 'b' (int8)");
    fn_ = type == 'f' ? MSV0_DISPATCH(copy_f32) : MSV0_DISPATCH(copy_s8);
    std::vector<Operand> ins, outs;
    for (const auto& s : in_shapes) ins.push_back({checked_shape(s, s.size(), "in_shapes"), type});
    for (const auto& s : out_shapes) outs.push_back({checked_shape(s, s.size(), "out_shapes"), type});
    if (outs.empty()) throw ArgError("out_shapes: no output");
    for (const MoveSpec& spec : moves) add(spec, in_shapes, out_shapes);
    set_operands(ins, outs);
  }

  void run(const void* const* in, void* const* out) const override {
    const CopyArgs a{in, out, moves_.data(), static_cast<int64_t>(moves_.size())};
    // Parts of at least ~16 KB, so that a part outweighs a thread hand-off.
    const int64_t parts = 1 + elements_ * (type_ == 'f' ? 4 : 1) / 16384;
    parallel_for(parts, 1, [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) fn_(a, p, parts);
    });
  }
  const char* name() const override { return "copy"; }

 private:
  void add(const MoveSpec& spec, const std::vector<std::vector<int64_t>>& in_shapes,
           const std::vector<std::vector<int64_t>>& out_shapes) {
    const auto& [input, output, value, src, dst, shape, src_stride, dst_stride] = spec;
    if (shape.size() != src_stride.size() || shape.size() != dst_stride.size())
      throw ArgError("move: shape and strides differ in length");
    if (input < -1 || input >= static_cast<int32_t>(in_shapes.size())) throw ArgError("move: bad input index");
    if (output < 0 || output >= static_cast<int32_t>(out_shapes.size())) throw ArgError("move: bad output index");
    const int64_t y_size = elements(out_shapes[output]);
    for (int64_t d : shape)
      if (d < 0) throw ArgError("move: negative dim");
    if (input < 0 && type_ == 'b' && !(value >= -128 && value <= 127 && value == static_cast<int8_t>(value)))
      throw ArgError("move: an int8 fill value must be an integer in [-128, 127]");
    if (elements(shape) == 0) return;
    int64_t lo, hi;
    box_bounds(dst, shape, dst_stride, &lo, &hi);
    if (lo < 0 || hi >= y_size) throw ArgError("move: writes outside the output");
    if (input >= 0) {
      box_bounds(src, shape, src_stride, &lo, &hi);
      if (lo < 0 || hi >= elements(in_shapes[input])) throw ArgError("move: reads outside its input");
    }
    // Drop unit dims, then merge a dim into the next where both strides make them one run.
    CopyMove m{input, output, value, 0, src, dst, {}, {}, {}, 0};
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
    m.rows = elements(shape) / m.shape[m.rank - 1];
    elements_ += elements(shape);
    moves_.push_back(m);
  }

  char type_;
  CopyFn fn_;
  std::vector<CopyMove> moves_;
  int64_t elements_ = 0;
};

}  // namespace

MSV0_BIND(m) {
  py::class_<Copy, NativeOp, std::shared_ptr<Copy>>(m, "Copy",
      "Data movement on `type` 'f' (float32) or 'b' (int8): outputs of out_shapes from inputs of in_shapes by "
      "`moves`, each (input or -1 to fill, output, fill value, src offset, dst offset, shape, src strides, dst "
      "strides) in elements; every move is bounds-checked here.")
      .def(py::init<const std::vector<std::vector<int64_t>>&, const std::vector<std::vector<int64_t>>&,
                    const std::vector<MoveSpec>&, char>(),
           py::arg("in_shapes"), py::arg("out_shapes"), py::arg("moves"), py::arg("type"));
}

}  // namespace msv0
#endif
