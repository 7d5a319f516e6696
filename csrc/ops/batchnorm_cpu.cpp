// Batch normalization on the CPU, NHWC: rows of c contiguous channels, so every loop runs over
// channels innermost (vectorized) and hpcnn's threads split the rows.
//
// Reductions (the batch statistics; dbeta and dgamma) take two levels: each thread sums its
// contiguous slice of rows in float over blocks of kBlock rows and adds each block's sums into
// double accumulators; the per-thread doubles are then added in thread order. Deterministic for a
// given thread count, and accurate to float rounding for any batch size. The variance is taken
// in one pass over values shifted by the first row (x - x[0]): sum and sum of squares of values
// near the mean, so E[d^2] - E[d]^2 does not cancel (the textbook one-pass formula loses the
// variance when |mean| >> std). Per element, forward is a subtraction and an FMA (y = (x - mean)
// * a + b with per-channel a, b) and backward a subtraction and two FMAs.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/scratch.h"
#include "core/thread_pool.h"
#include "ops/batchnorm.h"
#include "ops/elementwise.h"

namespace hpcnn::cpu {

namespace {

constexpr long long kBlock = 64;              // rows summed in float before a double accumulation
constexpr long long kRowsPerThread = 256;     // below this many rows per thread, fewer threads

// Per-thread double accumulators (two arrays of c each), summed in thread order into out0/out1.
class ChannelSums {
 public:
  ChannelSums(int c, int max_threads) : c_(c), partial_(static_cast<size_t>(max_threads) * 2 * c, 0.0) {}
  double* of(int tid) { return partial_.data() + static_cast<size_t>(tid) * 2 * c_; }
  void total(int nt, double* out0, double* out1) const {
    for (int j = 0; j < c_; ++j) out0[j] = out1[j] = 0.0;
    for (int t = 0; t < nt; ++t) {
      const double* p = partial_.data() + static_cast<size_t>(t) * 2 * c_;
      for (int j = 0; j < c_; ++j) {
        out0[j] += p[j];
        out1[j] += p[c_ + j];
      }
    }
  }

 private:
  int c_;
  std::vector<double> partial_;
};

// Runs body(tid, r0, r1, sums_of_tid) over slices of the rows; returns the thread count used.
template <typename Body>
int reduce_rows(long long rows, int c, ChannelSums& sums, int max_threads, Body&& body) {
  int used = 1;
  parallel_region([&](int tid, int nt) {
    if (tid == 0) used = nt;
    long long r0, r1;
    split_range(rows, tid, nt, r0, r1);
    double* acc = sums.of(tid);
    for (int j = 0; j < 2 * c; ++j) acc[j] = 0.0;
    body(r0, r1, acc);
  }, max_threads);
  return used;
}

int threads_for(long long rows) {
  const long long by_size = std::max(1LL, rows / kRowsPerThread);
  return static_cast<int>(std::min<long long>(get_num_threads(), by_size));
}

// y = (x - m) * a + b per channel (relu: max(., 0)), over all rows. x - m first: folding m into
// b (x * a + (b - m * a)) would leave y with an error of |m| * a ulps, large when |mean| >> std.
void normalize_rows(long long rows, int c, const float* x, const float* m, const float* a, const float* b, bool relu,
                    float* y) {
  parallel_for(rows, [&](long long r0, long long r1, int) {
    for (long long r = r0; r < r1; ++r) {
      const float* xr = x + r * c;
      float* yr = y + r * c;
      if (relu)
        for (int j = 0; j < c; ++j) yr[j] = ew::relu((xr[j] - m[j]) * a[j] + b[j]);
      else
        for (int j = 0; j < c; ++j) yr[j] = (xr[j] - m[j]) * a[j] + b[j];
    }
  }, kRowsPerThread);
}

}  // namespace

void batchnorm_forward_training(const BatchNormGeometry& g, const float* x, const float* gamma, const float* beta,
                                float eps, bool relu, float* y, float* mean, float* var, float* invstd) {
  const int C = g.c;
  const long long R = g.rows();
  const float* shift = x;  // the first row: a value of each channel's own distribution
  const int max_threads = threads_for(R);
  ChannelSums sums(C, max_threads);
  const int nt = reduce_rows(R, C, sums, max_threads, [&](long long r0, long long r1, double* acc) {
    float* blk = thread_scratch().floats(2 * static_cast<size_t>(C), 0);
    float* b1 = blk;
    float* b2 = blk + C;
    for (long long r = r0; r < r1; r += kBlock) {
      const long long re = std::min(r + kBlock, r1);
      for (int j = 0; j < C; ++j) b1[j] = b2[j] = 0.f;
      for (long long q = r; q < re; ++q) {
        const float* xr = x + q * C;
        for (int j = 0; j < C; ++j) {
          const float d = xr[j] - shift[j];
          b1[j] += d;
          b2[j] += d * d;
        }
      }
      for (int j = 0; j < C; ++j) {
        acc[j] += b1[j];
        acc[C + j] += b2[j];
      }
    }
  });
  std::vector<double> s1(C), s2(C);
  sums.total(nt, s1.data(), s2.data());
  std::vector<float> a(C), b(C);
  for (int j = 0; j < C; ++j) {
    const double dm = s1[j] / static_cast<double>(R);
    const double v = std::max(s2[j] / static_cast<double>(R) - dm * dm, 0.0);
    const double m = static_cast<double>(shift[j]) + dm;
    const double is = 1.0 / std::sqrt(v + static_cast<double>(eps));
    mean[j] = static_cast<float>(m);
    var[j] = static_cast<float>(v);
    invstd[j] = static_cast<float>(is);
    a[j] = static_cast<float>((gamma ? gamma[j] : 1.0) * is);
    b[j] = beta ? beta[j] : 0.f;
  }
  normalize_rows(R, C, x, mean, a.data(), b.data(), relu, y);
}

void batchnorm_forward_inference(const BatchNormGeometry& g, const float* x, const float* gamma, const float* beta,
                                 const float* moving_mean, const float* moving_var, float eps, bool relu, float* y) {
  const int C = g.c;
  std::vector<float> a(C), b(C);
  for (int j = 0; j < C; ++j) {
    a[j] = static_cast<float>((gamma ? gamma[j] : 1.0) / std::sqrt(static_cast<double>(moving_var[j]) + eps));
    b[j] = beta ? beta[j] : 0.f;
  }
  normalize_rows(g.rows(), C, x, moving_mean, a.data(), b.data(), relu, y);
}

void batchnorm_backward_training(const BatchNormGeometry& g, const float* x, const float* y, float* dy,
                                 const float* gamma, const float* mean, const float* invstd, float eps, bool relu,
                                 float* dx, float* dgamma, float* dbeta) {
  const int C = g.c;
  const long long R = g.rows();
  const int max_threads = threads_for(R);
  ChannelSums sums(C, max_threads);
  // sum g and sum g * (x - mean); the ReLU mask is applied on the fly (and again below).
  const int nt = reduce_rows(R, C, sums, max_threads, [&](long long r0, long long r1, double* acc) {
    float* blk = thread_scratch().floats(2 * static_cast<size_t>(C), 0);
    float* b1 = blk;
    float* b2 = blk + C;
    for (long long r = r0; r < r1; r += kBlock) {
      const long long re = std::min(r + kBlock, r1);
      for (int j = 0; j < C; ++j) b1[j] = b2[j] = 0.f;
      for (long long q = r; q < re; ++q) {
        const float* xr = x + q * C;
        const float* dr = dy + q * C;
        if (relu) {
          const float* yr = y + q * C;
          for (int j = 0; j < C; ++j) {
            const float gv = ew::relu_grad(yr[j], dr[j]);
            b1[j] += gv;
            b2[j] += gv * (xr[j] - mean[j]);
          }
        } else {
          for (int j = 0; j < C; ++j) {
            b1[j] += dr[j];
            b2[j] += dr[j] * (xr[j] - mean[j]);
          }
        }
      }
      for (int j = 0; j < C; ++j) {
        acc[j] += b1[j];
        acc[C + j] += b2[j];
      }
    }
  });
  std::vector<double> sg(C), sgx(C);
  sums.total(nt, sg.data(), sgx.data());
  // dx = k1 * g + k2 * (x - mean) + k3 per channel.
  std::vector<float> k1(C), k2(C), k3(C);
  const double inv_rows = 1.0 / static_cast<double>(R);
  for (int j = 0; j < C; ++j) {
    const double is = invstd[j];
    const double db = sg[j], dgm = sgx[j] * is;
    if (dbeta) dbeta[j] = static_cast<float>(db);
    if (dgamma) dgamma[j] = static_cast<float>(dgm);
    const double a = (gamma ? gamma[j] : 1.0) * is;
    k1[j] = static_cast<float>(a);
    k2[j] = static_cast<float>(-a * is * dgm * inv_rows);
    k3[j] = static_cast<float>(-a * db * inv_rows);
  }
  if (!dx) return;
  parallel_for(R, [&](long long r0, long long r1, int) {
    for (long long r = r0; r < r1; ++r) {
      const float* xr = x + r * C;
      const float* dr = dy + r * C;
      float* o = dx + r * C;
      if (relu) {
        const float* yr = y + r * C;
        for (int j = 0; j < C; ++j) o[j] = k1[j] * ew::relu_grad(yr[j], dr[j]) + k2[j] * (xr[j] - mean[j]) + k3[j];
      } else {
        for (int j = 0; j < C; ++j) o[j] = k1[j] * dr[j] + k2[j] * (xr[j] - mean[j]) + k3[j];
      }
    }
  }, kRowsPerThread);
}

void batchnorm_backward_inference(const BatchNormGeometry& g, const float* y, float* dy, const float* gamma,
                                  const float* moving_var, float eps, bool relu, float* dx) {
  const int C = g.c;
  std::vector<float> a(C);
  for (int j = 0; j < C; ++j)
    a[j] = static_cast<float>((gamma ? gamma[j] : 1.0) / std::sqrt(static_cast<double>(moving_var[j]) + eps));
  parallel_for(g.rows(), [&](long long r0, long long r1, int) {
    for (long long r = r0; r < r1; ++r) {
      const float* dr = dy + r * C;
      float* o = dx + r * C;
      if (relu) {
        const float* yr = y + r * C;
        for (int j = 0; j < C; ++j) o[j] = ew::relu_grad(yr[j], dr[j]) * a[j];
      } else {
        for (int j = 0; j < C; ++j) o[j] = dr[j] * a[j];
      }
    }
  }, kRowsPerThread);
}

void batchnorm_update_moving(int c, float* moving_mean, float* moving_var, const float* mean, const float* var,
                             float momentum) {
  for (int j = 0; j < c; ++j) {
    moving_mean[j] = ew::moving_average(moving_mean[j], mean[j], momentum);
    moving_var[j] = ew::moving_average(moving_var[j], var[j], momentum);
  }
}

}  // namespace hpcnn::cpu
