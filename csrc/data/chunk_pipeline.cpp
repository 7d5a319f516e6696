#include "data/chunk_pipeline.h"

#include <hdf5.h>

#include <algorithm>
#include <utility>

#include "core/errors.h"
#include "data/inflate.h"

namespace hpcnn::data {

bool ChunkPipeline::supported(int id) {
  return id == H5Z_FILTER_DEFLATE || id == H5Z_FILTER_SHUFFLE || id == H5Z_FILTER_FLETCHER32;
}

uint32_t fletcher32(const uint8_t* data, size_t len) {
  // Sums of 16-bit words, folded back into 16 bits at least every 360 words (before they can
  // overflow 32 bits), as HDF5 computes it.
  uint32_t a = 0, b = 0;
  size_t words = len / 2;
  while (words) {
    size_t block = std::min<size_t>(words, 360);
    words -= block;
    for (size_t i = 0; i < block; ++i, data += 2) {
      a += (static_cast<uint32_t>(data[0]) << 8) | data[1];
      b += a;
    }
    a = (a & 0xffff) + (a >> 16);
    b = (b & 0xffff) + (b >> 16);
  }
  if (len % 2) {
    a += static_cast<uint32_t>(data[0]) << 8;
    b += a;
    a = (a & 0xffff) + (a >> 16);
    b = (b & 0xffff) + (b >> 16);
  }
  a = (a & 0xffff) + (a >> 16);
  b = (b & 0xffff) + (b >> 16);
  return (b << 16) | a;
}

void swap_bytes(uint8_t* data, size_t n, size_t elem_size) {
  if (elem_size <= 1) return;
  for (size_t i = 0; i + elem_size <= n; i += elem_size) std::reverse(data + i, data + i + elem_size);
}

std::string ChunkPipeline::decode(const uint8_t* raw, size_t n, uint32_t mask, std::vector<uint8_t>& out,
                                  std::vector<uint8_t>& tmp) const {
  const uint8_t* cur = raw;
  size_t size = n;
  // A buffer other than the one `cur` points into, for the next step's output.
  auto other = [&]() -> std::vector<uint8_t>& { return cur == out.data() ? tmp : out; };
  for (size_t k = filters.size(); k-- > 0;) {
    if (k < 32 && (mask & (1u << k))) continue;  // skipped for this chunk when it was written
    switch (filters[k]) {
      case H5Z_FILTER_FLETCHER32: {
        if (size < 4) return cat("its ", size, " bytes are too few for a Fletcher-32 checksum");
        size -= 4;
        const uint8_t* s = cur + size;
        uint32_t stored = s[0] | (uint32_t(s[1]) << 8) | (uint32_t(s[2]) << 16) | (uint32_t(s[3]) << 24);
        uint32_t sum = fletcher32(cur, size);
        // HDF5 before 1.6.3 stored the checksum with the bytes of each half swapped; HDF5 accepts both.
        uint32_t old = ((sum & 0x00ff00ffu) << 8) | ((sum >> 8) & 0x00ff00ffu);
        if (stored != sum && stored != old) return "its Fletcher-32 checksum does not match";
        break;
      }
      case H5Z_FILTER_DEFLATE: {
        std::vector<uint8_t>& o = other();
        o.resize(chunk_bytes);
        std::string err = inflate_zlib(cur, size, o.data(), chunk_bytes);
        if (!err.empty()) return err;
        cur = o.data();
        size = chunk_bytes;
        break;
      }
      case H5Z_FILTER_SHUFFLE: {
        std::vector<uint8_t>& o = other();
        o.resize(size);
        unshuffle(cur, size, elem_size, o.data());
        cur = o.data();
        break;
      }
      default:
        return cat("filter ", filters[k], " is not one hpcnn decodes");
    }
  }
  if (size != chunk_bytes) return cat("it decodes to ", size, " bytes, expected ", chunk_bytes);
  if (cur == tmp.data()) std::swap(out, tmp);
  else if (cur != out.data()) out.assign(cur, cur + size);
  if (swap_bytes) hpcnn::data::swap_bytes(out.data(), out.size(), elem_size);
  return {};
}

}  // namespace hpcnn::data
