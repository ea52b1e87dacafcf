// Batched MatMul on the SGEMM slot: y[i] = op(a[i]) · op(b[i]) + bias for i < batch, where op
// transposes when asked. A constant b is packed once per batch at construction; a b computed
// by the graph (attention's Q·K^T and P·V) is packed per run, batch by batch, into the running
// thread's scratch. With at least as many batches as threads, each thread takes whole batches;
// otherwise the batches run one after another, each over the whole pool. With bf16 or fp16 (a
// constant b only), b and a are rounded to it (gemm_f32.h's Precision).
#include "kernels/gemm_f32.h"

#include "kernels/kernel.h"

#if MSV0_ONCE
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>
#include <pybind11/stl.h>

#include "runtime/native.h"
#include "runtime/weight_memory.h"

namespace msv0 {
namespace {

class MatMul : public NativeOp {
 public:
  // a_shape, b_shape, y_shape: the node's operand shapes, holding batch x (m x k, or k x m when
  // trans_a), batch x (k x n, or n x k when trans_b) and batch x m x n elements.
  MatMul(int64_t batch, int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b, std::optional<py::array> b,
         std::optional<py::array> bias, const std::vector<int64_t>& a_shape, const std::vector<int64_t>& b_shape,
         const std::vector<int64_t>& y_shape, const std::string& precision)
      : gemm_(&gemm_config(parse_precision(precision))), batch_(batch), m_(m), n_(n), k_(k), trans_a_(trans_a),
        trans_b_(trans_b), const_b_(b.has_value()) {
    if (batch < 0 || m < 0 || n < 0 || k < 0) throw ArgError("batch, m, n and k must be >= 0");
    if (precision != "fp32" && !b) throw ArgError(precision + ": needs a constant b");
    const auto expect = [](const std::vector<int64_t>& s, int64_t want, const char* what) {
      if (elements(checked_shape(s, s.size(), what)) != want)
        throw ArgError(std::string(what) + ": expected " + std::to_string(want) + " elements");
    };
    expect(a_shape, batch * m * k, "a_shape");
    expect(b_shape, batch * k * n, "b_shape");
    expect(y_shape, batch * m * n, "y_shape");
    if (bias) {
      expect_shape(*bias, {n}, "bias");
      const float* p = in_ptr<float>(*bias, "bias");
      bias_.assign(p, p + n);
    }
    if (b) {
      if (b->size() != batch * k * n) throw ArgError("b: expected " + std::to_string(batch * k * n) + " elements");
      const float* p = in_ptr<float>(*b, "b");
      const int64_t packed = gemm_->packed_size(n, k);
      packed_.resize(static_cast<size_t>(batch * packed));
      for (int64_t i = 0; i < batch; ++i)
        gemm_->pack(p + i * k * n, trans_b ? k : n, trans_b, n, k, packed_.data() + i * packed);
      set_operands({{a_shape}}, {{y_shape}});
    } else {
      set_operands({{a_shape}, {b_shape}}, {{y_shape}});
    }
  }

  void run(const void* const* in, void* const* out) const override {
    const auto* a = static_cast<const float*>(in[0]);
    const auto* b = const_b_ ? nullptr : static_cast<const float*>(in[1]);
    auto* y = static_cast<float*>(out[0]);
    if (batch_ == 0 || m_ == 0 || n_ == 0) return;
    const int64_t threads = bound_threads();
    if (batch_ >= threads && batch_ > 1) {
      parallel_for(batch_, 1, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) {
          const GemmArgs g = args(a, b, y, i, thread_scratch(scratch_floats()));
          gemm_->fn(g, 0, m_, 0, (n_ + kGemmNr - 1) / kGemmNr);
        }
      });
    } else {
      float* scratch = thread_scratch(scratch_floats());
      for (int64_t i = 0; i < batch_; ++i) sgemm_run(*gemm_, args(a, b, y, i, scratch));
    }
  }

  const char* name() const override { return "matmul"; }

 private:
  size_t scratch_floats() const {
    return static_cast<size_t>((trans_a_ ? m_ * k_ : 0) + (const_b_ ? 0 : sgemm_packed_size(n_, k_)));
  }

  // Batch i's GEMM: a transposed A and a computed B go to scratch first.
  GemmArgs args(const float* a, const float* b, float* y, int64_t i, float* scratch) const {
    const float* ai = a + i * m_ * k_;
    if (trans_a_) {  // stored k x m
      for (int64_t r = 0; r < m_; ++r)
        for (int64_t c = 0; c < k_; ++c) scratch[r * k_ + c] = ai[c * m_ + r];
      ai = scratch;
      scratch += m_ * k_;
    }
    const float* bp = packed_.data() + i * gemm_->packed_size(n_, k_);
    if (b) {
      gemm_->pack(b + i * k_ * n_, trans_b_ ? k_ : n_, trans_b_, n_, k_, scratch);
      bp = scratch;
    }
    return GemmArgs{ai, k_, bp, bias_.empty() ? nullptr : bias_.data(), y + i * m_ * n_, n_, m_, n_, k_,
                    -INFINITY, INFINITY};
  }

  const SgemmConfig* gemm_;  // the tier packed_ was packed for
  int64_t batch_, m_, n_, k_;
  bool trans_a_, trans_b_, const_b_;
  WeightVector<float> packed_;
  std::vector<float> bias_;
};

}  // namespace

MSV0_BIND(m) {
  py::class_<MatMul, NativeOp, std::shared_ptr<MatMul>>(
      m, "MatMul",
      "y[i] = op(a[i]) · op(b[i]) + bias for i < batch: a holds batch x (m x k, or k x m with trans_a), b batch x\n"
      "(k x n, or n x k with trans_b), y batch x m x n, in the operand shapes given. A constant b is packed once;\n"
      "without it b is the kernel's second input, packed per run.")
      .def(py::init<int64_t, int64_t, int64_t, int64_t, bool, bool, std::optional<py::array>,
                    std::optional<py::array>, const std::vector<int64_t>&, const std::vector<int64_t>&,
                    const std::vector<int64_t>&, const std::string&>(),
           py::arg("batch"), py::arg("m"), py::arg("n"), py::arg("k"), py::arg("trans_a"), py::arg("trans_b"),
           py::arg("b") = py::none(), py::arg("bias") = py::none(), py::arg("a_shape"), py::arg("b_shape"),
           py::arg("y_shape"), py::arg("precision") = "fp32");
}

}  // namespace msv0
#endif
