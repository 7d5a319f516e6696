// The host self-test's checks of batch normalization's own CUDA path (ops/batchnorm_body.h): one
// row per channel, the gamma/beta gradients in inference mode, and the layout of the batch
// statistics' buffer; against the CPU op.
#include "diagnostics/cuda_kernel_selftest_parts.h"

#include "ops/batchnorm.h"
#include "ops/batchnorm_body.h"

namespace hpcnn::cuda::selftest {

// Batch norm over a single row per channel (batchnorm_body.h, what the GPU runs instead of cuDNN
// then) against the CPU op: channel counts of the CPU's vector path (16) and its generic one (5),
// with and without gamma/beta and ReLU. The statistics, y, dgamma and dbeta bitwise; dx (about 0:
// a sum of terms that cancel, which a compiler may contract differently) to float rounding of
// its terms.
void check_batchnorm_one_row(std::vector<SelftestResult>& out) {
  double bad = 0, dx_err = 0;
  for (int c : {5, 16})
    for (bool affine : {true, false})
      for (bool relu : {false, true}) {
        const size_t n = static_cast<size_t>(c);
        const Vec x = random_vec(n, 61 + c, -3.f, 3.f), gamma = random_vec(n, 62), beta = random_vec(n, 63),
                  dy = random_vec(n, 64);
        const float* g = affine ? gamma.data() : nullptr;
        const float* b = affine ? beta.data() : nullptr;
        const float eps = 1e-3f;
        const BatchNormGeometry geo{1, 1, c};
        Vec y(n), mean(n), var(n), invstd(n), dx(n), dg(n), db(n);
        cpu::batchnorm_forward_training(geo, x.data(), g, b, eps, relu, y.data(), mean.data(), var.data(),
                                        invstd.data(), nullptr);
        Vec dy_cpu = dy;
        cpu::batchnorm_backward_training(geo, x.data(), y.data(), dy_cpu.data(), g, mean.data(), invstd.data(), eps,
                                         relu, dx.data(), dg.data(), db.data());
        Vec ey(n), emean(n), evar(n), einv(n), edx(n), edg(n), edb(n);
        for (int j = 0; j < c; ++j)
          ::hpcnn::body::batchnorm_one_row_forward(x[j], g, b, j, eps, relu, ey.data(), emean.data(), evar.data(),
                                                   einv.data());
        for (int j = 0; j < c; ++j)
          ::hpcnn::body::batchnorm_one_row_backward(x[j], ey[j], dy[j], g, emean.data(), einv.data(), j, relu,
                                                    edx.data(), edg.data(), edb.data());
        bad += mismatches(ey, y) + mismatches(emean, mean) + mismatches(evar, var) + mismatches(einv, invstd) +
               mismatches(edg, dg) + mismatches(edb, db);
        for (int j = 0; j < c; ++j) {  // relative to the size of the terms k1 * g that cancel
          const double term = std::fabs((affine ? gamma[j] : 1.0) * invstd[j] * dy[j]) + 1e-30;
          dx_err = std::max(dx_err, std::fabs(static_cast<double>(edx[j]) - dx[j]) / term);
        }
      }
  out.push_back({"batch norm over one row per channel vs the CPU: statistics, y, dgamma, dbeta (bitwise mismatches)",
                 bad, 0});
  out.push_back({"batch norm over one row per channel vs the CPU: dx (error relative to its terms)", dx_err, 1e-6});
}

// A trainable layer run in inference mode: the CUDA backend's gamma/beta gradients (its kernels'
// bodies in an emulated grid, then the column sums the GPU runs) against the CPU op's.
void check_batchnorm_inference_param_gradients(std::vector<SelftestResult>& out) {
  double err = 0, g_bad = 0;
  for (int c : {3, 16, 37})
    for (bool relu : {false, true}) {
      const long long rows = 2 * 7 * 5;
      const size_t count = static_cast<size_t>(rows) * c;
      const Vec x = random_vec(count, 71 + c, -2.f, 2.f), y = random_vec(count, 72), dy = random_vec(count, 73),
                mm = random_vec(c, 74), mv = random_vec(c, 75, 0.1f, 2.f);
      const float eps = 1e-3f;
      Vec dg(c), db(c), dy_cpu = dy;
      cpu::batchnorm_inference_param_gradients(BatchNormGeometry{2, 35, c}, x.data(), relu ? y.data() : nullptr,
                                               dy_cpu.data(), mm.data(), mv.data(), eps, relu, dg.data(), db.data());
      Vec dy_gpu = dy, term(count);
      for (size_t i = 0; i < count; ++i)
        ::hpcnn::body::batchnorm_inference_param_term(static_cast<long long>(i), c, x.data(),
                                                      relu ? y.data() : nullptr, dy_gpu.data(), mm.data(), term.data());
      Vec edb = emu_column_sum(dy_gpu, rows, c), edg = emu_column_sum(term, rows, c);
      for (int j = 0; j < c; ++j) ::hpcnn::body::batchnorm_inference_dgamma(j, mv.data(), eps, edg.data());
      err = std::max({err, rel_err(edg, dg), rel_err(edb, db)});
      g_bad += mismatches(dy_gpu, dy_cpu);
    }
  out.push_back({"batch norm gamma/beta gradients in inference mode vs the CPU (column sums of the terms)", err, 1e-5});
  out.push_back({"batch norm gradient in inference mode: g = dy masked by the ReLU vs the CPU (mismatches)", g_bad, 0});
}

// The batch statistics' layout (ops/batchnorm.h): every array at a 256-byte boundary of its buffer
// (cudaMalloc aligns the buffer itself to 256 bytes), apart, whatever the channel count.
void check_batchnorm_stats_layout(std::vector<SelftestResult>& out) {
  double bad = 0;
  for (long long c = 1; c <= 300; ++c) {
    for (int k = 0; k < 3; ++k) {
      const long long off = batchnorm_stats_offset(c, k);
      if ((off * static_cast<long long>(sizeof(float))) % 256 != 0) bad += 1;
      if (k > 0 && off < batchnorm_stats_offset(c, k - 1) + c) bad += 1;  // overlaps the previous array
    }
    if (batchnorm_stats_floats(c) < batchnorm_stats_offset(c, 2) + c) bad += 1;
  }
  out.push_back({"batch norm statistics: mean, var, invstd at 256-byte offsets, apart, c = 1..300 (violations)", bad,
                 0});
}

}  // namespace hpcnn::cuda::selftest
