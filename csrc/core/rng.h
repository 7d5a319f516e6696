// Counter-based random numbers (Philox4x32-10, Salmon et al., SC'11). The value for element i of
// draw `stream` under `seed` is a pure function of (seed, stream, i): no state, so a dropout mask
// or an initializer is the same whatever the thread count or the device (CPU and CUDA kernels
// call the same functions).
#pragma once

#include <cstdint>

#include "core/hd.h"

namespace hpcnn::rng {

struct U32x4 {
  uint32_t v[4];
};

HPCNN_HD void mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  uint64_t p = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(p >> 32);
  lo = static_cast<uint32_t>(p);
}

// counter = (c0, c1, c2, c3), key = (k0, k1)
HPCNN_HD U32x4 philox4x32_10(U32x4 c, uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(0xD2511F53u, c.v[0], hi0, lo0);
    mulhilo(0xCD9E8D57u, c.v[2], hi1, lo1);
    U32x4 n;
    n.v[0] = hi1 ^ c.v[1] ^ k0;
    n.v[1] = lo1;
    n.v[2] = hi0 ^ c.v[3] ^ k1;
    n.v[3] = lo0;
    c = n;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c;
}

// Four uniform draws in [0, 1) for block `block` (elements 4*block .. 4*block+3) of stream `stream`.
HPCNN_HD U32x4 bits4(uint64_t seed, uint64_t stream, uint64_t block) {
  U32x4 c{{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), static_cast<uint32_t>(stream),
           static_cast<uint32_t>(stream >> 32)}};
  return philox4x32_10(c, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

HPCNN_HD float to_unit_float(uint32_t x) {
  return static_cast<float>(x >> 8) * (1.0f / 16777216.0f);  // 24 bits: exact in float, in [0, 1)
}

// Uniform [0, 1) for element i of (seed, stream).
HPCNN_HD float uniform(uint64_t seed, uint64_t stream, uint64_t i) {
  U32x4 r = bits4(seed, stream, i >> 2);
  return to_unit_float(r.v[i & 3]);
}

}  // namespace hpcnn::rng
