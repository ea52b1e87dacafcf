// The first n (< 8) int8 lanes of a tail as the low bytes of an integer, and back, for the tiers
// without masked byte loads and stores (AVX2, NEON). The bytes are gathered in a general
// register: copied to the stack and loaded as a vector, every load stalls on store forwarding
// (a one-channel int8 depthwise ran 12x slower on AVX2 than on the scalar tier).
#pragma once
#include <cstdint>

namespace msv0 {
namespace MSV0_ISA {

inline uint64_t load_tail_bytes(const int8_t* p, int64_t n) {
  uint64_t bits = 0;
  int off = 0;
  if (n & 4) {
    uint32_t t;
    __builtin_memcpy(&t, p, 4);
    bits = t;
    off = 4;
  }
  if (n & 2) {
    uint16_t t;
    __builtin_memcpy(&t, p + off, 2);
    bits |= uint64_t{t} << (8 * off);
    off += 2;
  }
  if (n & 1) bits |= uint64_t{static_cast<uint8_t>(p[off])} << (8 * off);
  return bits;
}

inline void store_tail_bytes(int8_t* p, uint64_t bits, int64_t n) {
  int off = 0;
  if (n & 4) {
    const uint32_t t = static_cast<uint32_t>(bits);
    __builtin_memcpy(p, &t, 4);
    bits >>= 32;
    off = 4;
  }
  if (n & 2) {
    const uint16_t t = static_cast<uint16_t>(bits);
    __builtin_memcpy(p + off, &t, 2);
    bits >>= 16;
    off += 2;
  }
  if (n & 1) p[off] = static_cast<int8_t>(bits);
}

}  // namespace MSV0_ISA
}  // namespace msv0
