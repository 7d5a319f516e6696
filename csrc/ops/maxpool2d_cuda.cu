// Max pooling on the GPU, NHWC, with the contract of maxpool2d.h implemented exactly:
//   forward : one thread per output element; max over the window's in-bounds positions
//             (padded positions never win), compared as the CPU does.
//   backward: one thread per INPUT element gathers, in (oy, ox) order, the gradients of the
//             windows whose first maximal position (row-major) it is. No atomics: deterministic,
//             and the same additions in the same order as the CPU, so dx matches it bit for bit.
// cuDNN's pooling is not used: see the note at the top of cudnn_ops.cu (asymmetric 'same'
// padding and the undocumented tie rule of CUDNN_POOLING_MAX_DETERMINISTIC).
#include <cfloat>

#include "core/cuda_context.h"
#include "ops/maxpool2d.h"

namespace hpcnn::cuda {

namespace {

struct PoolArgs {
  int n, h, w, c, ph, pw, sh, sw, oh, ow, pt, pl;
};

PoolArgs args_of(const Pool2dGeometry& g) {
  return {g.n, g.h, g.w, g.c, g.ph, g.pw, g.sh, g.sw, g.oh, g.ow, g.pad_top, g.pad_left};
}

__device__ __forceinline__ void window(const PoolArgs& a, int oy, int ox, int& y0, int& y1, int& x0, int& x1) {
  y0 = oy * a.sh - a.pt;
  x0 = ox * a.sw - a.pl;
  y1 = min(y0 + a.ph, a.h);
  x1 = min(x0 + a.pw, a.w);
  y0 = max(y0, 0);
  x0 = max(x0, 0);
}

__global__ void maxpool_forward_kernel(PoolArgs a, const float* x, float* y) {
  long long count = (long long)a.n * a.oh * a.ow * a.c;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count; i += (long long)gridDim.x * blockDim.x) {
    long long t = i;
    int ci = t % a.c; t /= a.c;
    int ox = t % a.ow; t /= a.ow;
    int oy = t % a.oh;
    long long n = t / a.oh;
    int y0, y1, x0, x1;
    window(a, oy, ox, y0, y1, x0, x1);
    const float* xn = x + n * a.h * a.w * a.c + ci;
    float best = -INFINITY;
    for (int iy = y0; iy < y1; ++iy)
      for (int ix = x0; ix < x1; ++ix) {
        float v = xn[((long long)iy * a.w + ix) * a.c];
        best = v > best ? v : best;
      }
    y[i] = best;
  }
}

__global__ void maxpool_backward_kernel(PoolArgs a, const float* x, const float* y, const float* dy, float* dx) {
  long long count = (long long)a.n * a.h * a.w * a.c;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count; i += (long long)gridDim.x * blockDim.x) {
    long long t = i;
    int ci = t % a.c; t /= a.c;
    int ix = t % a.w; t /= a.w;
    int iy = t % a.h;
    long long n = t / a.h;
    // Outputs whose window covers iy: oy*sh - pt <= iy <= oy*sh - pt + ph - 1.
    int oy_lo = iy + a.pt - a.ph + 1;
    oy_lo = oy_lo <= 0 ? 0 : (oy_lo + a.sh - 1) / a.sh;
    int oy_hi = min((iy + a.pt) / a.sh, a.oh - 1);
    int ox_lo = ix + a.pl - a.pw + 1;
    ox_lo = ox_lo <= 0 ? 0 : (ox_lo + a.sw - 1) / a.sw;
    int ox_hi = min((ix + a.pl) / a.sw, a.ow - 1);
    const float* xn = x + n * a.h * a.w * a.c + ci;
    float acc = 0.f;
    for (int oy = oy_lo; oy <= oy_hi; ++oy)
      for (int ox = ox_lo; ox <= ox_hi; ++ox) {
        long long o = ((n * a.oh + oy) * a.ow + ox) * a.c + ci;
        float best = y[o];
        int y0, y1, x0, x1;
        window(a, oy, ox, y0, y1, x0, x1);
        // the first position (row-major in the window) holding the max gets the gradient
        int wy = -1, wx = -1;
        for (int py = y0; py < y1 && wy < 0; ++py)
          for (int px = x0; px < x1; ++px)
            if (xn[((long long)py * a.w + px) * a.c] == best) {
              wy = py;
              wx = px;
              break;
            }
        if (wy == iy && wx == ix) acc += dy[o];
      }
    dx[i] = acc;
  }
}

}  // namespace

void maxpool2d_forward(int device, const Pool2dGeometry& g, const float* x, float* y) {
  ContextLock ctx(device);
  long long count = (long long)g.n * g.oh * g.ow * g.c;
  maxpool_forward_kernel<<<blocks_for(count), 256, 0, ctx.stream()>>>(args_of(g), x, y);
  HPCNN_CUDA_CHECK_LAUNCH();
}

void maxpool2d_backward(int device, const Pool2dGeometry& g, const float* x, const float* y, const float* dy,
                        float* dx) {
  ContextLock ctx(device);
  long long count = (long long)g.n * g.h * g.w * g.c;
  maxpool_backward_kernel<<<blocks_for(count), 256, 0, ctx.stream()>>>(args_of(g), x, y, dy, dx);
  HPCNN_CUDA_CHECK_LAUNCH();
}

}  // namespace hpcnn::cuda
