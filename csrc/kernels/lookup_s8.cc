// int8 -> int8 through 256-entry tables (index q + 128), the inputs laid one after another along
// an axis of the output: the int8 Activations (one input; ops/activation_s8.py evaluates r1.1's
// arithmetic once per Session for every input value), int8 Concat (a table per input that
// requantizes it to the output's params; an identity table is a plain copy), and chains of
// element-wise steps from an int8 tensor to an int8 tensor (int8_tables.py), whose constants may
// differ along the last dim: a table per position of that dim then.
// One table: 64 bytes per 16 masked byte shuffles on AVX-512 (a shuffle per 16-entry group,
// each byte taking the group its high nibble names) or two vpermi2b with AVX512-VBMI (the
// avx512vnni slot where the CPU has it), 16 bytes per four 64-entry table lookups
// on aarch64, a byte load per byte elsewhere. A table per channel: 16 bytes per gather on
// AVX-512 (16 channels or more), else a byte load per byte.
#include "kernels/kernel.h"
#include "simd/pragmas.h"

namespace msv0 {
// y[r * y_stride + i] = table[x[r * x_stride + i] ^ 0x80] for `rows` runs of n bytes, or x's bytes
// themselves where table is null: a Concat's piece of every pixel in one call, which sets its
// tables up once (and copies a few channels a row without a memcpy call per row).
using LookupFn = void (*)(const int8_t* table, const uint8_t* x, int64_t x_stride, int8_t* y, int64_t y_stride,
                          int64_t n, int64_t rows);
MSV0_DECLARE(lookup_s8, LookupFn)
// y[i] = tables[c · 256 + (x[i] ^ 0x80)] for n bytes, c = (start + i) % channels: a table per
// position of the last dim. `tables` holds 3 readable bytes past its channels · 256.
using ChannelLookupFn = void (*)(const int8_t* tables, int64_t channels, const uint8_t* x, int8_t* y, int64_t start,
                                 int64_t n);
MSV0_DECLARE(lookup_channels_s8, ChannelLookupFn)
bool cpu_has_avx512vbmi();  // runtime/cpu_features.cc
}  // namespace msv0

#if !MSV0_ONCE
#if defined(__AVX512F__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace msv0 {
namespace MSV0_ISA {

#if defined(__AVX512BW__)
namespace {

// The first n (< 64) bytes.
__mmask64 first(int64_t n) { return (uint64_t{1} << n) - 1; }

// dst[i] = map(src[i]) for len bytes, 64 at a time (map: one vector of bytes to another).
template <class Map>
inline void map_run(const Map& map, const uint8_t* src, int8_t* dst, int64_t len) {
  int64_t i = 0;
  for (; i + 64 <= len; i += 64) _mm512_storeu_si512(dst + i, map(_mm512_loadu_si512(src + i)));
  if (i < len) _mm512_mask_storeu_epi8(dst + i, first(len - i), map(_mm512_maskz_loadu_epi8(first(len - i), src + i)));
}

// lookup_s8's rows through run(src, dst, len), which maps len contiguous bytes.
template <class Run>
void runs(const Run& run, const uint8_t* x, int64_t x_stride, int8_t* y, int64_t y_stride, int64_t n, int64_t rows) {
  if (n >= 64 || x_stride != n) {
    for (int64_t r = 0; r < rows; ++r, x += x_stride, y += y_stride) run(x, y, n);
    return;
  }
  // Short runs of a contiguous input (a Concat's 16 channels a pixel): whole vectors of it into a
  // buffer, then each run to its row, not a vector a quarter used per run.
  alignas(64) int8_t buf[4096];
  const int64_t per = 4096 / n;
  for (int64_t r0 = 0; r0 < rows; r0 += per) {
    const int64_t count = r0 + per < rows ? per : rows - r0;
    run(x + r0 * n, buf, count * n);
    for (int64_t r = 0; r < count; ++r)
      _mm512_mask_storeu_epi8(y + (r0 + r) * y_stride, first(n), _mm512_maskz_loadu_epi8(first(n), buf + r * n));
  }
}

}  // namespace

void lookup_s8(const int8_t* table, const uint8_t* x, int64_t x_stride, int8_t* y, int64_t y_stride, int64_t n,
               int64_t rows) {
  if (!table) {
    for (int64_t r = 0; r < rows; ++r, x += x_stride, y += y_stride) {
      int64_t i = 0;
      for (; i + 64 <= n; i += 64) _mm512_storeu_si512(y + i, _mm512_loadu_si512(x + i));
      if (i < n) _mm512_mask_storeu_epi8(y + i, first(n - i), _mm512_maskz_loadu_epi8(first(n - i), x + i));
    }
    return;
  }
  __m512i group[16];
  for (int g = 0; g < 16; ++g)
    group[g] = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(table + 16 * g)));
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  const auto map = [&](__m512i v) {
    const __m512i u = _mm512_xor_si512(v, _mm512_set1_epi8(static_cast<char>(0x80)));  // q + 128
    const __m512i low = _mm512_and_si512(u, nibble), high = _mm512_and_si512(_mm512_srli_epi16(u, 4), nibble);
    __m512i r = _mm512_setzero_si512();
    for (int g = 0; g < 16; ++g)
      r = _mm512_mask_shuffle_epi8(r, _mm512_cmpeq_epi8_mask(high, _mm512_set1_epi8(static_cast<char>(g))), group[g],
                                   low);
    return r;
  };
  runs([&](const uint8_t* src, int8_t* dst, int64_t len) { map_run(map, src, dst, len); }, x, x_stride, y, y_stride,
       n, rows);
}

#if defined(__AVX512VNNI__)
// The avx512vnni pass's slot where the CPU has AVX512-VBMI (every AVX-512 CPU with VNNI from
// Ice Lake and Zen 4 on; not Cascade Lake): two vpermi2b over the table's halves and a select by
// the index's top bit, against the sixteen shuffles above (YOLOv8n int8's 57 SiLU tables
// 0.59 -> 0.15 ms). The table is rolled by 128 so that the raw byte q indexes it.
MSV0_TARGET_PUSH("avx512vbmi")
void lookup_s8_vbmi(const int8_t* table, const uint8_t* x, int64_t x_stride, int8_t* y, int64_t y_stride, int64_t n,
                    int64_t rows) {
  if (!table) return lookup_s8(table, x, x_stride, y, y_stride, n, rows);
  const auto quarter = [&](int k) { return _mm512_loadu_si512(table + 64 * ((k + 2) % 4)); };
  const __m512i t0 = quarter(0), t1 = quarter(1), t2 = quarter(2), t3 = quarter(3);
  const auto map = [&](__m512i v) {
    return _mm512_mask_blend_epi8(_mm512_movepi8_mask(v), _mm512_permutex2var_epi8(t0, v, t1),
                                  _mm512_permutex2var_epi8(t2, v, t3));
  };
  runs([&](const uint8_t* src, int8_t* dst, int64_t len) { map_run(map, src, dst, len); }, x, x_stride, y, y_stride,
       n, rows);
}
MSV0_TARGET_POP
#endif
#elif defined(__aarch64__)
void lookup_s8(const int8_t* table, const uint8_t* x, int64_t x_stride, int8_t* y, int64_t y_stride, int64_t n,
               int64_t rows) {
  if (!table) {
    for (int64_t r = 0; r < rows; ++r, x += x_stride, y += y_stride) __builtin_memcpy(y, x, static_cast<size_t>(n));
    return;
  }
  uint8x16x4_t part[4];
  for (int k = 0; k < 4; ++k)
    for (int j = 0; j < 4; ++j) part[k].val[j] = vld1q_u8(reinterpret_cast<const uint8_t*>(table) + 64 * k + 16 * j);
  for (int64_t row = 0; row < rows; ++row, x += x_stride, y += y_stride) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
      // tbx leaves a byte whose index is past its 64 entries as it was, so each byte takes the
      // one part whose range holds its index.
      const uint8x16_t u = veorq_u8(vld1q_u8(x + i), vdupq_n_u8(0x80));
      uint8x16_t r = vqtbl4q_u8(part[0], u);
      for (int k = 1; k < 4; ++k) r = vqtbx4q_u8(r, part[k], vsubq_u8(u, vdupq_n_u8(static_cast<uint8_t>(64 * k))));
      vst1q_s8(y + i, vreinterpretq_s8_u8(r));
    }
    for (; i < n; ++i) y[i] = table[x[i] ^ 0x80];
  }
}
#else
void lookup_s8(const int8_t* table, const uint8_t* x, int64_t x_stride, int8_t* y, int64_t y_stride, int64_t n,
               int64_t rows) {
  for (int64_t r = 0; r < rows; ++r, x += x_stride, y += y_stride) {
    if (!table)
      __builtin_memcpy(y, x, static_cast<size_t>(n));
    else
      for (int64_t i = 0; i < n; ++i) y[i] = table[x[i] ^ 0x80];  // (uint8)q ^ 0x80 = q + 128
  }
}
#endif

namespace {

// Channel c through table c, in blocks of 64 pixels a channel at a time: one 256-byte table in
// use at once (all of them, 256 bytes per channel, outgrow L1).
void lookup_channels_bytes(const int8_t* t, int64_t channels, const uint8_t* x, int8_t* y, int64_t start,
                           int64_t n) {
  int64_t e = 0;
  for (int64_t c = start % channels; c && e < n; c = c + 1 == channels ? 0 : c + 1, ++e)  // to a pixel's start
    y[e] = t[c * 256 + (x[e] ^ 0x80)];
  for (int64_t pixels; (pixels = min_i(64, (n - e) / channels)) > 0; e += pixels * channels)
    for (int64_t c = 0; c < channels; ++c) {
      const int8_t* tc = t + c * 256;
      for (int64_t i = e + c, end = e + pixels * channels; i < end; i += channels) y[i] = tc[x[i] ^ 0x80];
    }
  for (int64_t c = 0; e < n; ++c, ++e) y[e] = t[c * 256 + (x[e] ^ 0x80)];
}

}  // namespace

#if defined(__AVX512F__)
// 16 bytes per gather of 4-byte words at byte offsets c · 256 + (x ^ 0x80), the low byte kept;
// lane j's offset c · 256 steps by 16 channels a vector, wrapping once past the last (channels
// >= 16). Fewer channels: byte loads.
void lookup_channels_s8(const int8_t* t, int64_t channels, const uint8_t* x, int8_t* y, int64_t start, int64_t n) {
  if (channels < 16 || channels > (int64_t{1} << 22)) {  // the offsets are int32
    lookup_channels_bytes(t, channels, x, y, start, n);
    return;
  }
  alignas(64) int32_t first[16];
  for (int j = 0; j < 16; ++j) first[j] = static_cast<int32_t>((start + j) % channels * 256);
  __m512i offset = _mm512_load_si512(first);
  const __m512i step = _mm512_set1_epi32(16 * 256), wrap = _mm512_set1_epi32(static_cast<int32_t>(channels * 256));
  const __m512i flip = _mm512_set1_epi32(0x80);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i q = _mm512_xor_si512(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))), flip);
    const __m512i words = _mm512_i32gather_epi32(_mm512_add_epi32(offset, q), t, 1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm512_cvtepi32_epi8(words));
    offset = _mm512_add_epi32(offset, step);
    offset = _mm512_mask_sub_epi32(offset, _mm512_cmpge_epi32_mask(offset, wrap), offset, wrap);
  }
  if (i < n) lookup_channels_bytes(t, channels, x + i, y + i, start + i, n - i);
}
#else
void lookup_channels_s8(const int8_t* t, int64_t channels, const uint8_t* x, int8_t* y, int64_t start, int64_t n) {
  lookup_channels_bytes(t, channels, x, y, start, n);
}
#endif

#if defined(__AVX512VNNI__)
[[maybe_unused]] static const bool lookup_s8_exported =
    ::msv0::lookup_s8_fill(MSV0_ISA_INDEX, cpu_has_avx512vbmi() ? &lookup_s8_vbmi : &lookup_s8);
#else
MSV0_EXPORT(lookup_s8)
#endif
MSV0_EXPORT(lookup_channels_s8)
}  // namespace MSV0_ISA
}  // namespace msv0

#else  // binding pass
#include <algorithm>
#include <string>
#include <vector>
#include <pybind11/stl.h>

#include "runtime/native.h"

namespace msv0 {
namespace {

class LookupS8 : public NativeOp {
 public:
  LookupS8(const std::vector<py::array>& tables, const std::vector<std::vector<int64_t>>& in_shapes, int64_t axis,
           char in_type, char out_type)
      : fn_(MSV0_DISPATCH(lookup_s8)), channel_fn_(MSV0_DISPATCH(lookup_channels_s8)) {
    for (char t : {in_type, out_type})
      if (t != 'b' && t != 'B') throw ArgError("in_type and out_type must be 'b' (int8) or 'B' (uint8)");
    if (in_shapes.empty() || tables.size() != in_shapes.size())
      throw ArgError("tables and in_shapes: expected one table per input, at least one");
    const size_t rank = in_shapes[0].size();
    if (axis < 0 || axis >= static_cast<int64_t>(std::max<size_t>(rank, 1)))
      throw ArgError("axis: out of range for rank " + std::to_string(rank));
    if (rank == 0 && in_shapes.size() > 1) throw ArgError("in_shapes: scalars do not concatenate");
    std::vector<Operand> ins;
    std::vector<int64_t> out_shape = in_shapes[0];
    if (rank) out_shape[axis] = 0;
    for (size_t k = 0; k < in_shapes.size(); ++k) {
      const auto& s = checked_shape(in_shapes[k], rank, "in_shapes");
      for (size_t d = 0; d < rank; ++d)
        if (static_cast<int64_t>(d) != axis && s[d] != out_shape[d])
          throw ArgError("in_shapes: dims off the axis differ");
      if (rank) out_shape[axis] += s[axis];
      ins.push_back({s, in_type});
      const py::array& t = tables[k];
      const int64_t last = rank ? s[rank - 1] : 1;
      const bool per_channel = t.ndim() == 2 && t.shape(0) == last && t.shape(1) == 256;
      if (!per_channel && (t.ndim() != 1 || t.shape(0) != 256))
        throw ArgError("table: expected 256 int8 values, or 256 per position of the input's last dim");
      const int8_t* p = in_ptr<int8_t>(t, "table");
      Piece piece{std::vector<int8_t>(p, p + t.size()), per_channel ? last : 1, true, 0, 0};
      for (int64_t i = 0; i < t.size(); ++i) piece.identity = piece.identity && p[i] == static_cast<int8_t>(i % 256 - 128);
      piece.table.resize(t.size() + 3);  // the 4-byte gathers' last 3 bytes
      pieces_.push_back(std::move(piece));
    }
    outer_ = 1;
    for (int64_t d = 0; d < axis && d < static_cast<int64_t>(rank); ++d) outer_ *= out_shape[d];
    for (size_t k = 0; k < in_shapes.size(); ++k) {
      pieces_[k].run = outer_ ? elements(in_shapes[k]) / outer_ : 0;
      pieces_[k].offset = row_;
      row_ += pieces_[k].run;
    }
    set_operands(ins, {{out_shape, out_type}});
  }

  void run(const void* const* in, void* const* out) const override {
    auto* y = static_cast<int8_t*>(out[0]);
    if (outer_ == 1) {  // one run per input: each split across threads
      for (size_t k = 0; k < pieces_.size(); ++k) {
        const auto* x = static_cast<const uint8_t*>(in[k]);
        parallel_for(pieces_[k].run, 1 << 16, [&](int64_t e0, int64_t e1) {
          map(pieces_[k], x + e0, 0, y + pieces_[k].offset + e0, 0, e0, e1 - e0, 1);
        });
      }
      return;
    }
    // Rows of the output (a pixel's channels, for a Concat of NHWC tensors along C), whole.
    parallel_for(outer_, grain_for(row_), [&](int64_t r0, int64_t r1) {
      for (size_t k = 0; k < pieces_.size(); ++k) {
        const Piece& p = pieces_[k];
        map(p, static_cast<const uint8_t*>(in[k]) + r0 * p.run, p.run, y + r0 * row_ + p.offset, row_, r0 * p.run,
            p.run, r1 - r0);
      }
    });
  }
  const char* name() const override { return "lookup_s8"; }

 private:
  struct Piece {
    std::vector<int8_t> table;  // 256 entries per channel, and 3 bytes for gathers to read
    int64_t channels;           // 1, or the input's last dim
    bool identity;
    int64_t run;     // elements of the input per output row
    int64_t offset;  // where they start in the row
  };

  // `rows` runs of n elements of one input, the first from its element `start` on.
  void map(const Piece& p, const uint8_t* x, int64_t x_stride, int8_t* y, int64_t y_stride, int64_t start, int64_t n,
           int64_t rows) const {
    const int8_t* t = p.table.data();
    if (p.channels == 1 || p.identity) {
      fn_(p.identity ? nullptr : t, x, x_stride, y, y_stride, n, rows);
      return;
    }
    for (int64_t r = 0; r < rows; ++r, x += x_stride, y += y_stride, start += x_stride)
      channel_fn_(t, p.channels, x, y, start, n);
  }

  LookupFn fn_;
  ChannelLookupFn channel_fn_;
  std::vector<Piece> pieces_;
  int64_t outer_ = 1;  // output rows: the product of the dims before the axis
  int64_t row_ = 0;    // elements per output row
};

}  // namespace

MSV0_BIND(m) {
  py::class_<LookupS8, NativeOp, std::shared_ptr<LookupS8>>(
      m, "LookupS8",
      "y = the int8 inputs of in_shapes concatenated along `axis`, each x mapped to tables[k][x + 128] (256 int8 "
      "values per input; an identity table copies), or to tables[k][c, x + 128] at position c of the input's last "
      "dim (256 per position). in_type / out_type 'B' read / write uint8 bytes instead: a table is indexed by "
      "the input byte xor 0x80 (q + 128 for int8) and gives the output byte.")
      .def(py::init<const std::vector<py::array>&, const std::vector<std::vector<int64_t>>&, int64_t, char, char>(),
           py::arg("tables"), py::arg("in_shapes"), py::arg("axis"), py::arg("in_type") = 'b', py::arg("out_type") = 'b');
}

}  // namespace msv0
#endif
