// FP32 peak by an FMA loop. Zen3 and Intel cores since Haswell retire two 256-bit FMAs per
// cycle with a 4-5 cycle latency, so a core needs >= 10 independent accumulator chains to keep
// both units busy; 12 leaves headroom. On a CPU with AVX-512 the loop runs 512-bit FMAs (chosen at
// run time, as small_gemm does: the build stays AVX2): OpenBLAS' sgemm reached 277 GFLOP/s on 2
// threads of this project's AVX-512 Xeon where the 256-bit loop measured 186, so a 256-bit peak
// there made kernels look faster than the machine. Each thread times itself and the result is
// the sum of the threads' rates (the threads run concurrently inside one parallel region).
#include "diagnostics/peak_flops.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "core/errors.h"
#include "core/thread_pool.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

namespace hpcnn::diagnostics {

namespace {

constexpr int kChains = 12;
constexpr long long kInner = 1 << 16;  // FMAs per chain between clock reads

#if defined(__AVX2__) && defined(__FMA__)
constexpr int kLanes = 8;
// Runs kInner rounds of kChains independent 8-lane FMAs; returns a value that depends on all
// of them so the compiler cannot drop the loop.
float fma_block(float seed) {
  __m256 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_ps(seed + 0.001f * i);
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (long long it = 0; it < kInner; ++it)
    for (int i = 0; i < kChains; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  __m256 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm256_add_ps(s, acc[i]);
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0] + out[7];
}

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define HPCNN_PEAK_AVX512 1
bool avx512_usable() {
  __builtin_cpu_init();  // libgcc's check covers the CPU's flag and the OS saving the zmm registers
  return __builtin_cpu_supports("avx512f");
}
// Only intrinsics follow the target pragma (as in ops/small_gemm_avx512_cpu.cpp).
#pragma GCC push_options
#pragma GCC target("avx512f,fma")
constexpr int kLanes512 = 16;
float fma_block512(float seed) {
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(seed + 0.001f * i);
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (long long it = 0; it < kInner; ++it)
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  __m512 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}
#pragma GCC pop_options
#endif
#else
constexpr int kLanes = 1;
float fma_block(float seed) {
  float acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = seed + 0.001f * i;
  for (long long it = 0; it < kInner; ++it)
    for (int i = 0; i < kChains; ++i) acc[i] = acc[i] * 0.999999f + 1e-7f;
  float s = 0.f;
  for (int i = 0; i < kChains; ++i) s += acc[i];
  return s;
}
#endif

}  // namespace

double measure_peak_gflops(int threads, double seconds) {
  HPCNN_CHECK_ARG(threads >= 1, "measure_peak_gflops: threads must be >= 1, got ", threads);
  HPCNN_CHECK_ARG(seconds > 0 && seconds < 3600, "measure_peak_gflops: seconds must be in (0, 3600), got ",
                  seconds);
  using clock = std::chrono::steady_clock;
  const int nt = std::min(threads, get_num_threads());
  std::vector<double> rate(nt, 0.0);
  std::vector<float> sink(nt, 0.f);
  int lanes = kLanes;
  float (*block)(float) = fma_block;
#if defined(HPCNN_PEAK_AVX512)
  if (avx512_usable()) {
    lanes = kLanes512;
    block = fma_block512;
  }
#endif
  const double flops_per_block = 2.0 * lanes * kChains * kInner;
  parallel_region([&](int tid, int) {
    sink[tid] = block(1.f);  // warm-up: clocks up, code in cache
    auto t0 = clock::now();
    long long blocks = 0;
    double elapsed = 0;
    do {
      sink[tid] += block(static_cast<float>(blocks));
      ++blocks;
      elapsed = std::chrono::duration<double>(clock::now() - t0).count();
    } while (elapsed < seconds);
    rate[tid] = blocks * flops_per_block / elapsed;
  }, nt);
  double total = 0;
  for (int t = 0; t < nt; ++t) total += rate[t];
  volatile float keep = sink[0];  // the loops' results are used
  (void)keep;
  return total * 1e-9;
}

}  // namespace hpcnn::diagnostics
