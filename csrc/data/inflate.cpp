#include "data/inflate.h"

#include <cstring>
#include <memory>

#include "core/errors.h"

#ifdef HPCNN_HAVE_LIBDEFLATE
#include <libdeflate.h>
#else
#include <zlib.h>
#endif

namespace hpcnn::data {

#ifdef HPCNN_HAVE_LIBDEFLATE
namespace {
struct FreeDecompressor {
  void operator()(libdeflate_decompressor* d) const { libdeflate_free_decompressor(d); }
};
}  // namespace

std::string inflate_zlib(const uint8_t* in, size_t in_size, uint8_t* out, size_t out_size) {
  thread_local std::unique_ptr<libdeflate_decompressor, FreeDecompressor> d(libdeflate_alloc_decompressor());
  if (!d) throw OutOfMemory("libdeflate_alloc_decompressor failed");
  size_t got = 0;
  libdeflate_result r = libdeflate_zlib_decompress(d.get(), in, in_size, out, out_size, &got);
  switch (r) {
    case LIBDEFLATE_SUCCESS:
      return got == out_size ? std::string() : cat("inflated to ", got, " bytes, expected ", out_size);
    case LIBDEFLATE_BAD_DATA: return "corrupt deflate data";
    case LIBDEFLATE_INSUFFICIENT_SPACE: return cat("inflates to more than the chunk's ", out_size, " bytes");
    default: return cat("libdeflate error ", static_cast<int>(r));
  }
}
const char* inflate_library() { return "libdeflate"; }

namespace {
struct FreeCompressor {
  void operator()(libdeflate_compressor* c) const { libdeflate_free_compressor(c); }
};
}  // namespace

bool deflate_zlib(const uint8_t* in, size_t size, int level, std::vector<uint8_t>& out) {
  thread_local int have_level = -1;
  thread_local std::unique_ptr<libdeflate_compressor, FreeCompressor> c;
  if (!c || have_level != level) {
    c.reset(libdeflate_alloc_compressor(level));
    if (!c) throw OutOfMemory(cat("libdeflate_alloc_compressor(", level, ") failed"));
    have_level = level;
  }
  if (size < 8) return false;
  out.resize(size - 1);  // only a strictly smaller result is worth storing
  size_t n = libdeflate_zlib_compress(c.get(), in, size, out.data(), out.size());
  if (n == 0) return false;
  out.resize(n);
  return true;
}
#else
std::string inflate_zlib(const uint8_t* in, size_t in_size, uint8_t* out, size_t out_size) {
  uLongf got = static_cast<uLongf>(out_size);
  int r = uncompress(out, &got, in, static_cast<uLong>(in_size));
  if (r == Z_OK) return got == out_size ? std::string() : cat("inflated to ", got, " bytes, expected ", out_size);
  if (r == Z_DATA_ERROR) return "corrupt deflate data";
  if (r == Z_BUF_ERROR) return "truncated deflate data or larger than the chunk";
  if (r == Z_MEM_ERROR) throw OutOfMemory("zlib uncompress: out of memory");
  return cat("zlib error ", r);
}
const char* inflate_library() { return "zlib"; }

bool deflate_zlib(const uint8_t* in, size_t size, int level, std::vector<uint8_t>& out) {
  uLongf n = compressBound(static_cast<uLong>(size));
  out.resize(n);
  int r = compress2(out.data(), &n, in, static_cast<uLong>(size), level);
  if (r == Z_MEM_ERROR) throw OutOfMemory("zlib compress2: out of memory");
  if (r != Z_OK || n >= size) return false;
  out.resize(n);
  return true;
}
#endif

void shuffle(const uint8_t* in, size_t size, size_t elem_size, uint8_t* out) {
  if (elem_size <= 1) {
    std::memcpy(out, in, size);
    return;
  }
  size_t n = size / elem_size;
  for (size_t b = 0; b < elem_size; ++b) {
    uint8_t* dst = out + b * n;
    for (size_t i = 0; i < n; ++i) dst[i] = in[i * elem_size + b];
  }
  size_t done = n * elem_size;
  std::memcpy(out + done, in + done, size - done);
}

void unshuffle(const uint8_t* in, size_t size, size_t elem_size, uint8_t* out) {
  if (elem_size <= 1) {
    std::memcpy(out, in, size);
    return;
  }
  size_t n = size / elem_size;
  for (size_t b = 0; b < elem_size; ++b) {
    const uint8_t* src = in + b * n;
    for (size_t i = 0; i < n; ++i) out[i * elem_size + b] = src[i];
  }
  size_t done = n * elem_size;
  std::memcpy(out + done, in + done, size - done);
}

}  // namespace hpcnn::data
