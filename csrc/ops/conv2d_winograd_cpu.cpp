// Winograd convolution F(m x m, 3x3), m = 2 or 4, on the CPU (see conv2d_winograd_cpu.h).
//
// Transforms (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", 2015), a = m + 2:
//   V = B^T d B   (d: a x a input tile)      U = G g G^T   (g: 3x3 kernel)
//   y = A^T m A   (m = U .* V, m x m output tile)
// and for the filter gradient dM = A dY A^T (dY: m x m output-gradient tile), dW = G^T dU G.
// Each 2-D transform is its 1-D transform (structs F23 and F43 in ops/conv2d_winograd_transforms.h)
// applied to the columns, then to the rows. F(2,3) has the interpolation points 0, 1, -1; F(4,3)
// adds 2, -2 (its constants reach 8 and 1/24; measured accuracy in tests/core/ops/test_winograd.py stays at
// rtol 1e-4).
// Output tile (ty, tx) covers output rows m*ty .. m*ty+m-1 and columns m*tx ..; its input tile
// starts at row m*ty - pad_top, column m*tx - pad_left. Input outside the image reads as zero
// (this is the padding, also the asymmetric bottom/right one); output outside is not written.
//
// The batch's tiles are numbered image by image (r = img * tiles + ty * tw + tx); forward splits
// them over the threads (one image keeps every thread busy), backward takes each thread's images.
// Per thread, per block of tiles (tiles_per_block: V and M of a block stay in L2):
//   V[t][xi][c]  <- input transform        (channels innermost: 8-wide vectors over c)
//   M[xi] = V[xi] * U[xi]                  a*a products (tiles x C) * (C x F), ops/small_gemm_cpu.h
// V and M are tile-major: a tile's a*a transformed values lie together, so each transform reads or
// writes one contiguous run per tile (plane-major, 36 streams a tile apart, the transforms ran at
// about a third of their instruction rate at 16 channels; measured 23 % faster at ResNet-20's first
// stage, 1-5 % at the others), and the products step through the planes with a row stride.
//   y <- A^T M A (+ bias, ReLU)            (8-wide vectors over f)
// Every output element is one fixed sequence of operations on its tile: results do not depend on
// the blocking, the thread count, or the other images of the batch (the filter gradient sums
// per-thread partials in thread order: bitwise reproducible for a given thread count).
#include "ops/conv2d_winograd_cpu.h"

#include <algorithm>
#include <vector>

#include "core/scratch.h"
#include "core/thread_pool.h"
#include "ops/conv2d_winograd_transforms.h"
#include "ops/kernel_cache_cpu.h"
#include "ops/small_gemm_cpu.h"

namespace hpcnn::cpu::winograd {

namespace {

// A thread's share of a forward pass is at least this many tiles: below it, waking a thread
// costs more than the tiles' work.
constexpr long long kMinTilesPerThread = 4;
// A thread's share of the output channels when the threads split those instead (forward_impl):
// whole 16-lane vectors of the AVX-512 product kernel, two of the AVX2 one.
constexpr int kColumnsPerThread = 16;

// Fewer tiles in a whole forward pass: im2col instead (applies()).
constexpr long long kMinTilesPerCall = 4;
// Fewer tiles in a whole forward pass: the threads split the output channels (forward_impl).
constexpr long long kSplitChannelsBelow = 32;

// One 3x3 stride-1 convolution as the Winograd routine sees it (forward or backward-data).
struct Problem {
  int h, w, c;             // input (height, width, channels)
  int oh, ow, f;           // output
  int pad_top, pad_left;   // input row/column of output (0, 0) is (-pad_top, -pad_left)
  int m;                   // output tile size
  int th() const { return (oh + m - 1) / m; }
  int tw() const { return (ow + m - 1) / m; }
  long long tiles() const { return (long long)th() * tw(); }
};

// Tiles per block: the block's a*a planes of V and M (tiles x (C + F) floats each) fit in about
// half of a core's 512 KiB L2, so that the transforms and the products of one block pass their
// data through the caches, never through memory (before: groups of ~512 tiles whose V and M
// planes, 2.4 MB at 16 channels, streamed through L3 between the three stages; the transforms
// then cost as much as the products). At least one row block of the product kernel (6 rows).
long long tiles_per_block(const Problem& p) {
  const long long budget = 256LL << 10;
  const long long a = p.m + 2;
  return std::max(6LL, budget / (a * a * (p.c + p.f) * 4));
}

// Distance between the a*a planes of U (c x f each): one cache line more than the plane, so that
// the a*a concurrent streams of the kernel transform do not all map to the same L1 set (c * f * 4
// bytes is a multiple of 4 KiB for every tutorial layer).
long long kernel_plane(int c, int f) { return (long long)c * f + 16; }

// U[xi][ci][fo] = (G g G^T)[xi] with g[a][b] = kernel value at (a, b) for input ci, output fo;
// `at(a, b, ci, fo)` reads it. Split over ci on hpcnn's threads, 8 values of fo at a time (on one
// thread the 36 * C * F transform of conv4 was measured to cost as much as its GEMMs).

template <class W, class At>
void kernel_transform(int c, int f, float* u, At at) {
  constexpr int A = W::a;
  const long long plane = kernel_plane(c, f);
  parallel_for(c, [&](long long c0, long long c1, int) {
    for (int ci = static_cast<int>(c0); ci < c1; ++ci) {
      for (int f0 = 0; f0 < f; f0 += L) {
        const int nf = std::min(L, f - f0);
        V8 g[9], o[A * A];
        for (int a = 0; a < 3; ++a)
          for (int b = 0; b < 3; ++b) {
            alignas(32) float t[L] = {};
            for (int l = 0; l < nf; ++l) t[l] = at(a, b, ci, f0 + l);
            g[a * 3 + b] = V8::load(t);
          }
        transform_2d<3, 3, A, A>(g, o, [](const V8* in, V8* out) { W::kernel(in, out); });
        for (int xi = 0; xi < A * A; ++xi) store_n(o[xi], u + xi * plane + (long long)ci * f + f0, nf);
      }
    }
  });
}

// Pointers to the rows x cols pixels of the tile starting at (y0, x0) of image xi (h x w x c);
// `outside` for the pixels outside the image (a row of zeros to read, or one to write and forget:
// the transforms then load and store without a test per pixel).
template <int R, int C, class P>
void tile_pointers(P* xi, int h, int w, int c, int y0, int x0, P* outside, P* (&src)[R][C]) {
  for (int i = 0; i < R; ++i) {
    int iy = y0 + i;
    for (int j = 0; j < C; ++j) {
      int ix = x0 + j;
      src[i][j] = (iy >= 0 && iy < h && ix >= 0 && ix < w) ? xi + ((long long)iy * w + ix) * c : outside;
    }
  }
}

// The calling thread's row of `floats` zeros (read for the padding) and its row to write the
// outputs outside the image into (a tile's right and bottom edges past an odd size).
const float* zero_row(long long floats) {
  static thread_local std::vector<float> row;
  if ((long long)row.size() < floats) row.assign(floats, 0.f);
  return row.data();
}
float* discard_row(long long floats) {
  static thread_local std::vector<float> row;
  if ((long long)row.size() < floats) row.resize(floats);
  return row.data();
}

// The 2-D transform of one 8-channel chunk from channel c0 of an R x R tile (src: its pixels) to
// the A*A planes (dst + k * plane, k = row * A + column): the 1-D transform `f` (R -> A) on each
// column straight from the pixels, then on each row, stored straight into the planes (no copy of
// the tile or of the result through a local array: the stores were what bounded the transforms).
template <int R, int A, class F>
__attribute__((noinline)) void chunk_to_planes(const float* const (&src)[R][R], int c0, float* dst, long long plane, F f) {
  V8 t[A][R];
#pragma GCC unroll 8
  for (int j = 0; j < R; ++j) {
    V8 col[R], res[A];
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) col[i] = V8::load(src[i][j] + c0);
    f(col, res);
#pragma GCC unroll 8
    for (int k = 0; k < A; ++k) t[k][j] = res[k];
  }
#pragma GCC unroll 8
  for (int k = 0; k < A; ++k) {
    V8 res[A];
    f(t[k], res);
#pragma GCC unroll 8
    for (int l = 0; l < A; ++l) res[l].store(dst + (k * A + l) * plane + c0);
  }
}

// Where tile r of a batch lies: r = img * tiles + ty * tw + tx.
struct TilePos {
  long long img;
  int ty, tx;
};
TilePos tile_position(long long r, long long tiles, int tw) {
  const long long img = r / tiles, in_image = r - img * tiles;
  return {img, static_cast<int>(in_image / tw), static_cast<int>(in_image % tw)};
}

// out[t][xi][:] (xi < A*A, `plane` floats apart, tile t's A*A values together) = the 2-D transform `f` (R x R -> A x A)
// of the R x R tile r0 + t (t < count) of x (images of h x w x ch), tiles numbered as in
// tile_position over th x tw tiles per image: the tile of (ty, tx) starts at row M*ty - top,
// column M*tx - left, and reads zero outside the image. The input transform (R = A, the padding
// as top/left) and the output-gradient transform (R = M, no offset) are this loop.
template <int R, int A, int M, class F>
void tiles_to_planes(const float* x, int h, int w, int ch, int top, int left, int th, int tw, long long r0, int count,
                     float* out, long long plane, F f) {
  const long long tiles = (long long)th * tw;
  const float* zeros = zero_row(ch);
  const int full = ch / L * L;  // channels in whole chunks; the tail (ch % 8) goes through load_n
  for (int t = 0; t < count; ++t) {
    const TilePos at = tile_position(r0 + t, tiles, tw);
    const float* xi = x + at.img * h * w * ch;
    const float* src[R][R];
    tile_pointers<R, R>(xi, h, w, ch, M * at.ty - top, M * at.tx - left, zeros, src);
    float* dst = out + (long long)t * A * A * plane;  // the tile's A*A planes, one after another
    for (int c0 = 0; c0 < full; c0 += L) chunk_to_planes<R, A>(src, c0, dst, plane, f);
    if (full < ch) {
      const int nc = ch - full;
      V8 d[R * R], o[A * A];
      for (int i = 0; i < R; ++i)
        for (int j = 0; j < R; ++j) d[i * R + j] = load_n(src[i][j] + full, nc);
      transform_2d<R, R, A, A>(d, o, f);
      for (int xi2 = 0; xi2 < A * A; ++xi2) store_n(o[xi2], dst + xi2 * plane + full, nc);
    }
  }
}

// V[t][xi][:] for the tiles r0 .. r0 + count - 1.
template <class W>
void input_transform(const Problem& p, const float* x, long long r0, int count, float* v, long long plane) {
  tiles_to_planes<W::a, W::a, W::m>(x, p.h, p.w, p.c, p.pad_top, p.pad_left, p.th(), p.tw(), r0, count, v, plane,
                                    [](const V8* in, V8* out) { W::input(in, out); });
}

// One 8-channel chunk (from f0) of an output tile: A^T M A from the A*A planes (src + k * plane),
// + bias (+ the residual's pixels `res` when RES), ReLU when RELU, stored to the M x M pixels dst
// (TAIL: the last nf < 8 channels).
// Not inlined: inlined into the loop over chunks, GCC kept the 16 output pointers on the stack
// and advanced each in memory per chunk.
template <class W, bool RELU, bool RES, bool TAIL>
__attribute__((noinline)) void planes_to_chunk(const float* src, long long plane, int f0, int nf, V8 bias,
                                               float* const (&dst)[W::m][W::m],
                                               const float* const (&res_px)[W::m][W::m]) {
  constexpr int A = W::a, M = W::m;
  V8 t[M][A];
#pragma GCC unroll 8
  for (int j = 0; j < A; ++j) {
    V8 col[A], res[M];
#pragma GCC unroll 8
    for (int i = 0; i < A; ++i) col[i] = !TAIL ? V8::load(src + (i * A + j) * plane + f0)
                                                 : load_n(src + (i * A + j) * plane + f0, nf);
    W::output(col, res);
#pragma GCC unroll 8
    for (int k = 0; k < M; ++k) t[k][j] = res[k];
  }
#pragma GCC unroll 8
  for (int k = 0; k < M; ++k) {
    V8 res[M];
    W::output(t[k], res);
#pragma GCC unroll 8
    for (int l = 0; l < M; ++l) {
      V8 out = res[l] + bias;
      if (RES) out = out + (!TAIL ? V8::load(res_px[k][l] + f0) : load_n(res_px[k][l] + f0, nf));
      if (RELU) out = out.relu();
      if (!TAIL) out.store(dst[k][l] + f0);
      else store_n(out, dst[k][l] + f0, nf);
    }
  }
}

// y (the tiles r0 .. r0 + count - 1) <- act(A^T M A + bias (+ residual when RES)); bias may be null.
template <class W, bool RELU, bool RES>
void output_transform(const Problem& p, const float* m, long long plane, const float* bias, const float* residual,
                      long long r0, int count, float* y, int c0, int c1) {
  constexpr int M = W::m;
  const int tw = p.tw();
  const long long tiles = p.tiles();
  float* discard = discard_row(p.f);
  const float* zeros = zero_row(p.f);
  for (int t = 0; t < count; ++t) {
    const TilePos at = tile_position(r0 + t, tiles, tw);
    const long long image = at.img * p.oh * p.ow * p.f;
    float* dst[M][M];
    tile_pointers<M, M>(y + image, p.oh, p.ow, p.f, M * at.ty, M * at.tx, discard, dst);
    const float* res_px[M][M] = {};
    if (RES) tile_pointers<M, M>(residual + image, p.oh, p.ow, p.f, M * at.ty, M * at.tx, zeros, res_px);
    const float* src = m + (long long)t * W::a * W::a * plane;
    int f0 = c0;
    for (; f0 + L <= c1; f0 += L)
      planes_to_chunk<W, RELU, RES, false>(src, plane, f0, L, load_n(bias ? bias + f0 : nullptr, L), dst, res_px);
    if (f0 < c1) {
      const int nf = c1 - f0;
      planes_to_chunk<W, RELU, RES, true>(src, plane, f0, nf, load_n(bias ? bias + f0 : nullptr, nf), dst, res_px);
    }
  }
}

// dM[t][xi][:] = (A dY A^T)[xi] for the output-gradient tiles dY (m x m, zero outside the output)
// r0 .. r0 + count - 1: the gradient of the Winograd-domain product U .* V.
template <class W>
void grad_output_transform(const Problem& p, const float* dy, long long r0, int count, float* dm, long long plane) {
  tiles_to_planes<W::m, W::a, W::m>(dy, p.oh, p.ow, p.f, 0, 0, p.th(), p.tw(), r0, count, dm, plane,
                                    [](const V8* in, V8* out) { W::grad_output(in, out); });
}

// The tiles [r_begin, r_end) in blocks (tiles_per_block), each with its V (the input transform of
// x; scratch slot 0) and room for as large an M (slot 1): step(r0, cnt, v, vs, m, ms) for the block
// of cnt tiles from r0; vs and ms: the distance between planes (tile t's plane xi at
// (t * a*a + xi) * vs), i.e. the channel counts.
template <class W, class Step>
void for_each_block(const Problem& p, const float* x, long long r_begin, long long r_end, Step&& step) {
  constexpr int AA = W::a * W::a;
  const long long block = tiles_per_block(p);
  const long long vs = p.c, ms = p.f;  // tile-major: plane xi of tile t at (t * AA + xi) * channels
  float* v = thread_scratch().floats(AA * block * vs, 0);
  float* m = thread_scratch().floats(AA * block * ms, 1);
  for (long long r0 = r_begin; r0 < r_end; r0 += block) {
    const int cnt = static_cast<int>(std::min(block, r_end - r0));
    input_transform<W>(p, x, r0, cnt, v, vs);
    step(r0, cnt, v, vs, m, ms);
  }
}

// y (the tiles [r_begin, r_end), output channels [c0, c1)) = act(conv(x, U) + bias (+ residual)),
// block by block: M = V * U, y from M. residual: null or y's shape.
template <class W>
void run(const Problem& p, const float* x, const float* u, const float* bias, bool relu, const float* residual,
         float* y, long long r_begin, long long r_end, int c0, int c1) {
  for_each_block<W>(p, x, r_begin, r_end, [&](long long r0, int cnt, const float* v, long long vs, float* m,
                                              long long ms) {
    for (int xi = 0; xi < W::a * W::a; ++xi)  // M[xi] (tiles x F) = V[xi] (tiles x C) * U[xi] (C x F)
      small_gemm(cnt, c1 - c0, p.c, v + xi * vs, W::a * W::a * vs, 1, u + xi * kernel_plane(p.c, p.f) + c0, p.f,
                 m + xi * ms + c0, W::a * W::a * ms, false);
    if (residual) {
      if (relu) output_transform<W, true, true>(p, m, ms, bias, residual, r0, cnt, y, c0, c1);
      else output_transform<W, false, true>(p, m, ms, bias, residual, r0, cnt, y, c0, c1);
    } else {
      if (relu) output_transform<W, true, false>(p, m, ms, bias, nullptr, r0, cnt, y, c0, c1);
      else output_transform<W, false, false>(p, m, ms, bias, nullptr, r0, cnt, y, c0, c1);
    }
  });
}

// The calling thread's buffer for the transformed kernel (grows only: no allocation per step).
float* kernel_buffer(long long count) {
  static thread_local std::vector<float> buf;
  if ((long long)buf.size() < count) buf.resize(count);
  return buf.data();
}

// Output tile size for an oh x ow output: the one with fewer Winograd-domain products
// (a*a per tile, partial tiles counted whole), F(2,3) on a tie. F(4,3) multiplies 1.78x less
// than F(2,3) on large outputs; its transforms cost more per output and its rounding error is
// ~20x larger (still ~1e-5 of the largest output at 512 channels, under the 1e-4 the tests ask).
// Measured faster for all three tutorial layers in all three directions (bench/RESULTS.md
// "Winograd convolution"); F(2,3) serves outputs of 1 or 2 rows/columns (a 4x4 tile would be
// mostly padding there) and 6x6.
int tile_size(int oh, int ow) {
  const long long p2 = 16LL * ((oh + 1) / 2) * ((ow + 1) / 2);
  const long long p4 = 36LL * ((oh + 3) / 4) * ((ow + 3) / 4);
  return p4 < p2 ? 4 : 2;
}
int tile_forward(const Conv2dGeometry& g) { return tile_size(g.oh, g.ow); }
int tile_backward_data(const Conv2dGeometry& g) { return tile_size(g.h, g.w); }
int tile_filter(const Conv2dGeometry& g) { return tile_size(g.oh, g.ow); }

Problem forward_problem(const Conv2dGeometry& g, int m) {
  return Problem{g.h, g.w, g.c, g.oh, g.ow, g.f, g.pad_top, g.pad_left, m};
}

template <class W>
void forward_impl(const Conv2dGeometry& g, const float* x, const float* w, const float* b, float* y, bool relu,
                  const float* residual) {
  const Problem p = forward_problem(g, W::m);
  const long long cf = (long long)g.c * g.f;
  // U is kept between calls (ops/kernel_cache_cpu.h): remade only when w's values changed.
  const KernelLease lease = winograd_kernel_cache().get(
      w, 9 * cf, {g.c, g.f, W::m}, W::a * W::a * kernel_plane(g.c, g.f), [&](float* dst) {
        kernel_transform<W>(g.c, g.f, dst, [&](int a, int bb, int ci, int fo) {
          return w[(a * 3 + bb) * cf + (long long)ci * g.f + fo];
        });
      });
  const float* u = lease.data();
  const long long tiles = g.n * p.tiles();
  if (tiles < kSplitChannelsBelow && g.f >= 2 * kColumnsPerThread && get_num_threads() > 1) {
    // Few tiles (a deep layer at batch 1): split by tiles, each thread would read all of U for a
    // few rows of products. The threads split the output channels instead, each reading its part
    // of U (the cost at these sizes) and transforming the few input tiles itself. Each element is
    // computed as in the tile split.
    const long long slices = g.f / kColumnsPerThread;  // the last one takes the channels left over
    parallel_for(slices, [&](long long s0, long long s1, int) {
      const int c0 = static_cast<int>(s0 * kColumnsPerThread);
      const int c1 = s1 == slices ? g.f : static_cast<int>(s1 * kColumnsPerThread);
      run<W>(p, x, u, b, relu, residual, y, 0, tiles, c0, c1);
    });
    return;
  }
  // The batch's tiles split over the threads (not its images: one image keeps every thread busy).
  parallel_for(tiles, [&](long long r0, long long r1, int) { run<W>(p, x, u, b, relu, residual, y, r0, r1, 0, g.f); },
               kMinTilesPerThread);
}

template <class W>
const float* backward_kernel_impl(const Conv2dGeometry& g, const float* w) {
  // dx[iy, ix, ci] = sum dy[iy + pad_top - ky, ix + pad_left - kx, fo] * w[ky, kx, ci, fo]
  //               = sum dy[iy - (2 - pad_top) + a, ...] * w[2 - a, 2 - b, ci, fo]:
  // input channels fo, output channels ci, kernel value at (a, b) = w[2 - a, 2 - b, ci, fo].
  float* u = kernel_buffer(W::a * W::a * kernel_plane(g.c, g.f));
  const long long cf = (long long)g.c * g.f;
  kernel_transform<W>(g.f, g.c, u, [&](int a, int bb, int fo, int ci) {
    return w[((2 - a) * 3 + (2 - bb)) * cf + (long long)ci * g.f + fo];
  });
  return u;
}

template <class W>
void filter_grad_impl(const Conv2dGeometry& g, const float* x, const float* dy, int n0, int count, float* du_acc) {
  const Problem p = forward_problem(g, W::m);
  const long long tiles = p.tiles();
  for_each_block<W>(p, x, n0 * tiles, (n0 + count) * tiles, [&](long long r0, int cnt, const float* v, long long vs,
                                                               float* dm, long long ms) {
    grad_output_transform<W>(p, dy, r0, cnt, dm, ms);
    for (int xi = 0; xi < W::a * W::a; ++xi)  // dU[xi] (C x F) += V[xi]^T (C x tiles) * dM[xi] (tiles x F)
      small_gemm(p.c, p.f, cnt, v + xi * vs, 1, W::a * W::a * vs, dm + xi * ms, W::a * W::a * ms,
                 du_acc + xi * kernel_plane(p.c, p.f), p.f,
                 true);
  });
}

template <class W>
void filter_grad_finish_impl(const Conv2dGeometry& g, const float* du, float* dw) {
  constexpr int A = W::a;
  const long long plane = (long long)g.c * g.f, dplane = kernel_plane(g.c, g.f);
  const long long chunks = (plane + L - 1) / L;
  parallel_for(chunks, [&](long long k0, long long k1, int) {
    for (long long k = k0; k < k1; ++k) {
      const long long e = k * L;
      const int n = static_cast<int>(std::min<long long>(L, plane - e));
      V8 d[A * A], o[9];
      for (int xi = 0; xi < A * A; ++xi) d[xi] = load_n(du + xi * dplane + e, n);
      transform_2d<A, A, 3, 3>(d, o, [](const V8* in, V8* out) { W::grad_kernel(in, out); });
      for (int t = 0; t < 9; ++t) store_n(o[t], dw + t * plane + e, n);
    }
  }, 128);
}

}  // namespace

bool applies(const Conv2dGeometry& g) {
  // Measured (bench/RESULTS.md "Winograd convolution"): with fewer channels the thin GEMMs and
  // the transforms cost more than the saved multiplications.
  if (!(g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 && g.c >= 16 && g.f >= 16)) return false;
  // A transformed kernel too large for the kernel cache (U and its source: ResNet50's 256- and
  // 512-channel layers, 11.8 and 47 MB) is remade on every call and streams from memory for every
  // block of tiles: im2col's sgemm reads the kernel itself, once. Measured, 2 threads (one layer,
  // bench_conv2d, bench/RESULTS.md issue 38): 7x7x512 forward 1.39 against 5.48 ms at batch 1, 26.7
  // against 33.2 at 32, backward 206 against 386 ms at 128; 14x14x256 forward 1.03 against 2.18 ms
  // at batch 1 (24.5 against 27.3 for Winograd at 32), backward 26 against 36 ms at 16. 128x128 and
  // 128x256 kernels (2.9 and 5.9 MB) keep Winograd, ahead at every batch size measured.
  const int m = tile_forward(g);
  const long long a = m + 2;
  if (4 * (9LL * g.c * g.f + a * a * kernel_plane(g.c, g.f)) > KernelCache::kMaxEntryBytes) return false;
  // A batch of fewer tiles than this reads U (four times the kernel for F(4x4, 3x3)) for too little
  // work: im2col reads the kernel itself (measured: the tutorial CNN's conv4 at batch 1, one tile).
  return (long long)g.n * ((g.oh + m - 1) / m) * ((g.ow + m - 1) / m) >= kMinTilesPerCall;
}

void forward(const Conv2dGeometry& g, const float* x, const float* w, const float* b, float* y, bool relu,
             const float* residual) {
  if (tile_forward(g) == 4) forward_impl<F43>(g, x, w, b, y, relu, residual);
  else forward_impl<F23>(g, x, w, b, y, relu, residual);
}

const float* backward_kernel(const Conv2dGeometry& g, const float* w) {
  return tile_backward_data(g) == 4 ? backward_kernel_impl<F43>(g, w) : backward_kernel_impl<F23>(g, w);
}

void backward_data(const Conv2dGeometry& g, const float* u, const float* dy, float* dx, int n0, int count, bool add) {
  const int m = tile_backward_data(g);
  const Problem p{g.oh, g.ow, g.f, g.h, g.w, g.c, 2 - g.pad_top, 2 - g.pad_left, m};
  const long long r0 = n0 * p.tiles(), r1 = (n0 + count) * p.tiles();
  // add: dx is its own residual. The output stage reads each pixel's residual just before it
  // writes that pixel, and every pixel belongs to one tile, so reading and writing dx is safe.
  const float* residual = add ? dx : nullptr;
  if (m == 4) run<F43>(p, dy, u, nullptr, false, residual, dx, r0, r1, 0, p.f);
  else run<F23>(p, dy, u, nullptr, false, residual, dx, r0, r1, 0, p.f);
}

long long filter_grad_size(const Conv2dGeometry& g) {
  const long long a = tile_filter(g) + 2;
  return a * a * kernel_plane(g.c, g.f);
}

void filter_grad(const Conv2dGeometry& g, const float* x, const float* dy, int n0, int count, float* du_acc) {
  if (tile_filter(g) == 4) filter_grad_impl<F43>(g, x, dy, n0, count, du_acc);
  else filter_grad_impl<F23>(g, x, dy, n0, count, du_acc);
}

void filter_grad_finish(const Conv2dGeometry& g, const float* du, float* dw) {
  if (tile_filter(g) == 4) filter_grad_finish_impl<F43>(g, du, dw);
  else filter_grad_finish_impl<F23>(g, du, dw);
}

}  // namespace hpcnn::cpu::winograd
