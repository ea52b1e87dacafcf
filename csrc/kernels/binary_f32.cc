// Element-wise Add/Sub/Mul/Div/Maximum/Minimum/SquaredDifference on float32 with a fused clamp
// (RELU/RELU6, which only Add/Sub/Mul/Div carry), for the shapes the
// hot paths use: both operands full, one a single value, one a row repeated along the leading
// dims (a per-channel operand on NHWC), or one whose every value is repeated over a row (a
// per-pixel operand [N, H, W, 1] on NHWC). The output is flat; elements [e0, e1) split over
// threads, and each run of a row is one vector loop.
#include "kernels/binary_f32.h"

#include "kernels/binary_loop.h"

namespace msv0 {
MSV0_DECLARE(binary_f32, BinaryFn)

}  // namespace msv0

#if !MSV0_ONCE
namespace msv0 {
namespace MSV0_ISA {
namespace {

template <int Op>
VecF apply(VecF a, VecF b) {
  if constexpr (Op == kBinAdd) return a + b;
  if constexpr (Op == kBinSub) return a - b;
  if constexpr (Op == kBinMul) return a * b;
  if constexpr (Op == kBinDiv) return a / b;
  // r1.1's C loops: a > b ? a : b and a > b ? b : a, so where unordered Maximum gives b and
  // Minimum gives a; max/min return their second operand then.
  if constexpr (Op == kBinMaximum) return max(a, b);
  if constexpr (Op == kBinMinimum) return min(b, a);
  const VecF d = a - b;  // r1.1: Sub, then Mul of the result by itself
  return d * d;
}

template <int Op>
void run_range(const BinaryArgs& g, int64_t e0, int64_t e1) {
  const VecF lo = VecF::splat(g.lo), hi = VecF::splat(g.hi);
  const bool clamp = g.clamp;
  binary_range(g.a, g.a_kind, g.b, g.b_kind, g.y, g.inner, e0, e1, [=](VecF a, VecF b) {
    const VecF x = apply<Op>(a, b);
    return clamp ? min(max(x, lo), hi) : x;
  });
}

}  // namespace

void binary_f32(const BinaryArgs& g, int64_t e0, int64_t e1) {
  switch (g.op) {
    case kBinAdd: return run_range<kBinAdd>(g, e0, e1);
    case kBinSub: return run_range<kBinSub>(g, e0, e1);
    case kBinMul: return run_range<kBinMul>(g, e0, e1);
    case kBinDiv: return run_range<kBinDiv>(g, e0, e1);
    case kBinMaximum: return run_range<kBinMaximum>(g, e0, e1);
    case kBinMinimum: return run_range<kBinMinimum>(g, e0, e1);
    default: return run_range<kBinSquaredDifference>(g, e0, e1);
  }
}

MSV0_EXPORT(binary_f32)
}  // namespace MSV0_ISA
}  // namespace msv0

#else  // binding pass
#include <string>
#include <vector>
#include <pybind11/stl.h>

#include "kernels/post_op.h"
#include "runtime/native.h"

namespace msv0 {
namespace {

// y = clamp(a op b, lo, hi) on arrays of the shapes fixed here.
class Binary : public NativeOp {
 public:
  Binary(int32_t op, int32_t a_kind, int32_t b_kind, int64_t inner, const std::vector<int64_t>& a_shape,
         const std::vector<int64_t>& b_shape, const std::vector<int64_t>& y_shape, float lo, float hi)
      : fn_(MSV0_DISPATCH(binary_f32)) {
    if (op < kBinAdd || op > kBinSquaredDifference) throw ArgError("unknown binary op " + std::to_string(op));
    const int64_t size = binary_size(a_kind, b_kind, inner, a_shape, b_shape, y_shape);
    const bool clamp = lo > -INFINITY || hi < INFINITY;
    g_ = BinaryArgs{nullptr, nullptr, nullptr, size, inner, op, a_kind, b_kind, clamp, lo, hi};
    set_operands({{a_shape}, {b_shape}}, {{y_shape}});
  }

  void run(const void* const* in, void* const* out) const override {
    BinaryArgs g = g_;
    g.a = static_cast<const float*>(in[0]);
    g.b = static_cast<const float*>(in[1]);
    g.y = static_cast<float*>(out[0]);
    // 16K elements per chunk: large enough that a chunk outweighs a thread hand-off.
    parallel_for(g.size, 16384, [&](int64_t e0, int64_t e1) {
      fn_(g, e0, e1);
      post_.apply(g.y, e0, e1);
    });
  }
  const char* name() const override { return "binary"; }
  const BinaryArgs* args() const { return post_ ? nullptr : &g_; }
  // This Binary, then its own post-op, as a post-op of the kernel that writes its operand
  // `1 - constant_pos` (of the output's shape), with a copy of `constant` as the other.
  PostOp post_op(const py::array_t<float, py::array::c_style | py::array::forcecast>& constant,
                 int constant_pos) const {
    if (constant.size() != elements(inputs()[static_cast<size_t>(constant_pos)].shape))
      throw ArgError("constant: " + std::to_string(constant.size()) + " values, the operand takes " +
                     std::to_string(elements(inputs()[static_cast<size_t>(constant_pos)].shape)));
    PostOp::Stage st;
    st.binary = fn_;
    st.b = g_;
    st.data_first = constant_pos == 0;
    st.data = std::make_shared<const std::vector<float>>(constant.data(), constant.data() + constant.size());
    return PostOp{{std::move(st)}}.then(post_);
  }
  // A residual Add followed by PReLU (MediaPipe's blocks) applies the PReLU to each chunk.
  std::shared_ptr<NativeOp> with_post(const PostOp& post) const override {
    auto c = std::make_shared<Binary>(*this);
    c->post_ = post_.then(post);
    return c;
  }

 private:
  BinaryFn fn_;
  BinaryArgs g_;
  PostOp post_;
};

}  // namespace

const BinaryArgs* binary_args(const NativeOp& op) {
  const auto* b = dynamic_cast<const Binary*>(&op);
  return b ? b->args() : nullptr;
}

MSV0_BIND(m) {
  py::class_<Binary, NativeOp, std::shared_ptr<Binary>>(m, "Binary",
      "y = clamp(a op b, lo, hi) on float32; op 0..6 = add, sub, mul, div, maximum, minimum, squared difference "
      "(r1.1's C forms: a > b ? a : b, a > b ? b : a, (a - b)²); operand kinds 0 = full, "
      "1 = a row of `inner` repeated, 2 = one value, 3 = one value per row of `inner`; arrays of exactly "
      "a_shape, b_shape, y_shape.")
      .def(py::init<int32_t, int32_t, int32_t, int64_t, const std::vector<int64_t>&, const std::vector<int64_t>&,
                    const std::vector<int64_t>&, float, float>(),
           py::arg("op"), py::arg("a_kind"), py::arg("b_kind"), py::arg("inner"), py::arg("a_shape"),
           py::arg("b_shape"), py::arg("y_shape"), py::arg("lo") = -INFINITY, py::arg("hi") = INFINITY);
  m.def("with_binary",
        [](const NativeOp& producer, const NativeOp& binary, const py::array_t<float, py::array::c_style | py::array::forcecast>& constant,
           int constant_pos) -> std::shared_ptr<NativeOp> {
          const auto* b = dynamic_cast<const Binary*>(&binary);
          if (!b) throw ArgError("binary: expected a Binary object");
          if (constant_pos != 0 && constant_pos != 1) throw ArgError("constant_pos must be 0 or 1");
          const Operand& operand = b->inputs()[constant_pos == 0 ? 1 : 0];
          check_feeds(producer, operand.shape, "the Binary's operand");
          // The fused object writes the producer's shape in place: an operand broadcast to the
          // output, or of another rank, stays a step of its own.
          if (operand.shape != b->outputs()[0].shape) return nullptr;
          return producer.with_post(b->post_op(constant, constant_pos));
        },
        py::arg("producer"), py::arg("binary"), py::arg("constant"), py::arg("constant_pos"),
        "A copy of the producer kernel object (sharing its packed weights) that runs the Binary object on each "
        "block of output as it writes it, with `constant` (copied) as the Binary's input `constant_pos` and the "
        "block as the other; None where the producer or the Binary cannot.");
}

}  // namespace msv0
#endif
