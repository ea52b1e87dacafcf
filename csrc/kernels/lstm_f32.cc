// r1.1's fp32 Lstm (format-v0.md §5, ops/sequence.py) with constant weights, packed once; the
// initial states are read at run time (streaming models feed them). Per direction, the input
// projection of every step is one SGEMM (x · W^T + B_in + B_rec); each step then adds h · R^T (a
// GEMM of `batch` rows on one thread: a step is too small to split; the directions of a
// bidirectional layer run on two) and applies the gates in iofc order with the fp32 Activation
// kernel's sigmoid and Padé tanh (activation_f32.cc).
#include "kernels/activation_f32.h"
#include "kernels/gemm_f32.h"

#include "kernels/kernel.h"

#if MSV0_ONCE
#include <algorithm>
#include <memory>
#include <vector>
#include <pybind11/stl.h>

#include "runtime/native.h"

namespace msv0 {
namespace {

class Lstm : public NativeOp {
 public:
  // w [dirs, 4H, in], r [dirs, 4H, H], b [dirs, 8H] are packed here. The inputs are the node's:
  // x [seq, batch, in], then w, r and b again (unread: their packed copies serve), h0 and c0
  // [dirs, batch, H]; y [seq, dirs, batch, H], h_n and c_n [dirs, batch, H] the outputs.
  Lstm(const py::array& w, const py::array& r, const py::array& b, int64_t seq, int64_t batch)
      : gemm_(&sgemm_config()), act_(MSV0_DISPATCH(activation_f32)), seq_(seq), batch_(batch) {
    if (w.ndim() != 3 || w.shape(1) % 4 || w.shape(1) == 0) throw ArgError("w: expected [dirs, 4H, in]");
    dirs_ = w.shape(0), hid_ = w.shape(1) / 4, in_ = w.shape(2);
    if (dirs_ != 1 && dirs_ != 2) throw ArgError("w: 1 or 2 directions");
    if (seq < 0 || batch < 0) throw ArgError("seq and batch must be >= 0");
    expect_shape(r, {dirs_, 4 * hid_, hid_}, "r");
    expect_shape(b, {dirs_, 8 * hid_}, "b");
    const float* pw = in_ptr<float>(w, "w");
    const float* pr = in_ptr<float>(r, "r");
    const float* pb = in_ptr<float>(b, "b");
    for (int64_t d = 0; d < dirs_; ++d) {
      std::vector<float> bias(static_cast<size_t>(4 * hid_));
      for (int64_t j = 0; j < 4 * hid_; ++j) bias[j] = pb[d * 8 * hid_ + j] + pb[d * 8 * hid_ + 4 * hid_ + j];
      w_.push_back(pack_b(pw + d * 4 * hid_ * in_, in_, true, 4 * hid_, in_, bias.data()));
      r_.push_back(pack_b(pr + d * 4 * hid_ * hid_, hid_, true, 4 * hid_, hid_, nullptr));
    }
    const std::vector<int64_t> state{dirs_, batch, hid_};
    set_operands({{{seq, batch, in_}}, {{dirs_, 4 * hid_, in_}}, {{dirs_, 4 * hid_, hid_}}, {{dirs_, 8 * hid_}},
                  {state}, {state}},
                 {{{seq, dirs_, batch, hid_}}, {state}, {state}});
  }

  void run(const void* const* in, void* const* out) const override {
    const auto* x = static_cast<const float*>(in[0]);
    const auto* h0 = static_cast<const float*>(in[4]);
    const auto* c0 = static_cast<const float*>(in[5]);
    auto* y = static_cast<float*>(out[0]);
    auto* hn = static_cast<float*>(out[1]);
    auto* cn = static_cast<float*>(out[2]);
    const int64_t g4 = 4 * hid_, rows = seq_ * batch_, state = batch_ * hid_;
    // Per direction: gx (seq·batch x 4H), one step's gates (batch x 4H) and tanh(c) (H); h and c
    // live in hn and cn.
    const int64_t per_dir = rows * g4 + batch_ * g4 + hid_;
    float* scratch = thread_scratch(static_cast<size_t>(dirs_ * per_dir));
    const int64_t panels = (g4 + kGemmNr - 1) / kGemmNr;
    const auto apply = [&](int32_t kind, float* v, int64_t n) {
      act_(ActArgs{v, v, nullptr, 0, kind, 0.f, 0.f, 0.f, 0.f}, 0, n);
    };
    for (int64_t d = 0; d < dirs_; ++d) {
      std::copy(h0 + d * state, h0 + (d + 1) * state, hn + d * state);
      std::copy(c0 + d * state, c0 + (d + 1) * state, cn + d * state);
      if (rows)
        sgemm_run(*gemm_, GemmArgs{x, in_, w_[d]->w.data(), w_[d]->bias_or_null(), scratch + d * per_dir, g4, rows,
                                   g4, in_, -INFINITY, INFINITY});
    }
    // The steps of one direction depend on each other and are too small to split, but the two
    // directions of a bidirectional layer are independent: each runs on a thread of its own.
    parallel_for(rows ? dirs_ : 0, 1, [&](int64_t d0, int64_t d1) {
      for (int64_t d = d0; d < d1; ++d) {
        const float* gx = scratch + d * per_dir;
        float* gates = scratch + d * per_dir + rows * g4;
        float* tanh_c = gates + batch_ * g4;
        float* h = hn + d * state;
        float* c = cn + d * state;
        for (int64_t s = 0; s < seq_; ++s) {
          const int64_t t = d == 1 ? seq_ - 1 - s : s;
          gemm_->fn(GemmArgs{h, hid_, r_[d]->w.data(), nullptr, gates, g4, batch_, g4, hid_, -INFINITY, INFINITY},
                    0, batch_, 0, panels);
          for (int64_t bi = 0; bi < batch_; ++bi) {
            const float* a = gx + (t * batch_ + bi) * g4;
            float* g = gates + bi * g4;
            for (int64_t j = 0; j < g4; ++j) g[j] = a[j] + g[j];
            apply(kActSigmoid, g, 3 * hid_);  // i, o, f
            apply(kActTanh, g + 3 * hid_, hid_);
            float* hb = h + bi * hid_;
            float* cb = c + bi * hid_;
            for (int64_t j = 0; j < hid_; ++j) tanh_c[j] = cb[j] = g[2 * hid_ + j] * cb[j] + g[j] * g[3 * hid_ + j];
            apply(kActTanh, tanh_c, hid_);
            float* yb = y + ((t * dirs_ + d) * batch_ + bi) * hid_;
            for (int64_t j = 0; j < hid_; ++j) yb[j] = hb[j] = g[hid_ + j] * tanh_c[j];
          }
        }
      }
    });
  }
  const char* name() const override { return "lstm"; }

 private:
  const SgemmConfig* gemm_;  // the tier w_ and r_ were packed for
  ActivationFn act_;
  int64_t seq_, batch_, dirs_ = 1, hid_ = 0, in_ = 0;
  std::vector<std::shared_ptr<const PackedB>> w_, r_;  // per direction; w_ carries B_in + B_rec
};

}  // namespace

MSV0_BIND(m) {
  py::class_<Lstm, NativeOp, std::shared_ptr<Lstm>>(
      m, "Lstm",
      "r1.1's fp32 Lstm (iofc gates, Activation sigmoid and Padé tanh) with constant w [dirs, 4H, in], r [dirs, 4H,\n"
      "H], b [dirs, 8H], packed here: inputs x [seq, batch, in], w, r, b (unread), h0 and c0 [dirs, batch, H]\n"
      "-> y [seq, dirs, batch, H], h_n, c_n.")
      .def(py::init<const py::array&, const py::array&, const py::array&, int64_t, int64_t>(), py::arg("w"),
           py::arg("r"), py::arg("b"), py::arg("seq"), py::arg("batch"));
}

}  // namespace msv0
#endif
