// The arithmetic of the CPU Winograd convolution (ops/conv2d_winograd_cpu.cpp, whose opening
// comment gives the transforms and the tile layout): eight floats as one vector, the 1-D
// transforms of F(2,3) and F(4,3) (input, output, kernel and their gradients' counterparts, on
// vectors of tiles or on floats of kernels) and their 2-D form. Internal to that file: what it
// computes per tile, apart from how it walks the tiles, blocks and threads.
#pragma once

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "ops/elementwise.h"

namespace hpcnn::cpu::winograd {

constexpr int L = 8;  // channel chunk: one AVX register of floats

// Eight floats (one AVX register where the build has AVX2, a plain array otherwise): the
// transforms are written once over 8 channels at a time; GCC does not vectorize them by itself
// (measured: scalar code, the transforms then cost more than the GEMMs).
#if defined(__AVX2__)
struct V8 {
  __m256 v;
  static V8 load(const float* p) { return {_mm256_loadu_ps(p)}; }
  static V8 zero() { return {_mm256_setzero_ps()}; }
  void store(float* p) const { _mm256_storeu_ps(p, v); }
  V8 relu() const { return {_mm256_max_ps(v, _mm256_setzero_ps())}; }  // NaN -> 0, as ew::relu
  friend V8 operator+(V8 a, V8 b) { return {_mm256_add_ps(a.v, b.v)}; }
  friend V8 operator-(V8 a, V8 b) { return {_mm256_sub_ps(a.v, b.v)}; }
  friend V8 operator*(float s, V8 a) { return {_mm256_mul_ps(_mm256_set1_ps(s), a.v)}; }
  friend V8 operator-(V8 a) { return {_mm256_sub_ps(_mm256_setzero_ps(), a.v)}; }
};
#else
struct V8 {
  float v[L];
  static V8 load(const float* p) { V8 r; for (int l = 0; l < L; ++l) r.v[l] = p[l]; return r; }
  static V8 zero() { V8 r; for (int l = 0; l < L; ++l) r.v[l] = 0.f; return r; }
  void store(float* p) const { for (int l = 0; l < L; ++l) p[l] = v[l]; }
  V8 relu() const { V8 r; for (int l = 0; l < L; ++l) r.v[l] = ew::relu(v[l]); return r; }
  friend V8 operator+(V8 a, V8 b) { for (int l = 0; l < L; ++l) a.v[l] += b.v[l]; return a; }
  friend V8 operator-(V8 a, V8 b) { for (int l = 0; l < L; ++l) a.v[l] -= b.v[l]; return a; }
  friend V8 operator*(float s, V8 a) { for (int l = 0; l < L; ++l) a.v[l] *= s; return a; }
  friend V8 operator-(V8 a) { for (int l = 0; l < L; ++l) a.v[l] = -a.v[l]; return a; }
};
#endif

// n < L floats through a zero-padded buffer (the channel tail).
inline V8 load_part(const float* p, int n) {
  alignas(32) float t[L] = {};
  for (int l = 0; l < n; ++l) t[l] = p[l];
  return V8::load(t);
}
inline void store_part(V8 a, float* p, int n) {
  alignas(32) float t[L];
  a.store(t);
  for (int l = 0; l < n; ++l) p[l] = t[l];
}
inline V8 load_n(const float* p, int n) { return !p ? V8::zero() : n == L ? V8::load(p) : load_part(p, n); }
inline void store_n(V8 a, float* p, int n) {
  if (n == L) a.store(p);
  else store_part(a, p, n);
}

// The 1-D transforms of F(2,3): T is V8 (tiles) or float (kernels).
struct F23 {
  static constexpr int m = 2, a = 4;
  template <class T> static void input(const T* d, T* o) {  // B^T d
    o[0] = d[0] - d[2];
    o[1] = d[1] + d[2];
    o[2] = d[2] - d[1];
    o[3] = d[1] - d[3];
  }
  template <class T> static void output(const T* s, T* y) {  // A^T s
    y[0] = s[0] + s[1] + s[2];
    y[1] = s[1] - s[2] - s[3];
  }
  template <class T> static void kernel(const T* g, T* u) {  // G g
    u[0] = g[0];
    u[1] = 0.5f * (g[0] + g[1] + g[2]);
    u[2] = 0.5f * (g[0] - g[1] + g[2]);
    u[3] = g[2];
  }
  template <class T> static void grad_output(const T* d, T* o) {  // A d
    o[0] = d[0];
    o[1] = d[0] + d[1];
    o[2] = d[0] - d[1];
    o[3] = -d[1];
  }
  template <class T> static void grad_kernel(const T* d, T* g) {  // G^T d
    g[0] = d[0] + 0.5f * (d[1] + d[2]);
    g[1] = 0.5f * (d[1] - d[2]);
    g[2] = 0.5f * (d[1] + d[2]) + d[3];
  }
};

// The 1-D transforms of F(4,3) (points 0, 1, -1, 2, -2).
struct F43 {
  static constexpr int m = 4, a = 6;
  template <class T> static void input(const T* d, T* o) {  // B^T d
    o[0] = 4.f * d[0] - 5.f * d[2] + d[4];
    o[1] = d[3] + d[4] - 4.f * (d[1] + d[2]);
    o[2] = 4.f * (d[1] - d[2]) + d[4] - d[3];
    o[3] = 2.f * (d[3] - d[1]) + d[4] - d[2];
    o[4] = 2.f * (d[1] - d[3]) + d[4] - d[2];
    o[5] = 4.f * d[1] - 5.f * d[3] + d[5];
  }
  template <class T> static void output(const T* s, T* y) {  // A^T s
    T p12 = s[1] + s[2], m12 = s[1] - s[2], p34 = s[3] + s[4], m34 = s[3] - s[4];
    y[0] = s[0] + p12 + p34;
    y[1] = m12 + 2.f * m34;
    y[2] = p12 + 4.f * p34;
    y[3] = m12 + 8.f * m34 + s[5];
  }
  template <class T> static void kernel(const T* g, T* u) {  // G g
    u[0] = 0.25f * g[0];
    u[1] = (-1.f / 6) * (g[0] + g[1] + g[2]);
    u[2] = (-1.f / 6) * (g[0] - g[1] + g[2]);
    u[3] = (1.f / 24) * g[0] + (1.f / 12) * g[1] + (1.f / 6) * g[2];
    u[4] = (1.f / 24) * g[0] - (1.f / 12) * g[1] + (1.f / 6) * g[2];
    u[5] = g[2];
  }
  template <class T> static void grad_output(const T* d, T* o) {  // A d
    T p02 = d[0] + d[2], p13 = d[1] + d[3];
    o[0] = d[0];
    o[1] = p02 + p13;
    o[2] = p02 - p13;
    T q02 = d[0] + 4.f * d[2], q13 = 2.f * d[1] + 8.f * d[3];
    o[3] = q02 + q13;
    o[4] = q02 - q13;
    o[5] = d[3];
  }
  template <class T> static void grad_kernel(const T* d, T* g) {  // G^T d
    g[0] = 0.25f * d[0] - (1.f / 6) * (d[1] + d[2]) + (1.f / 24) * (d[3] + d[4]);
    g[1] = (1.f / 6) * (d[2] - d[1]) + (1.f / 12) * (d[3] - d[4]);
    g[2] = (1.f / 6) * (d[3] + d[4] - d[1] - d[2]) + d[5];
  }
};

// out (ro x co) = T in T^T: the 1-D transform `f` (ri -> ro) on every column of in (ri x ci),
// then on every row of the result (ci -> co). in/out are row-major arrays of T.
template <int RI, int CI, int RO, int CO, class T, class F>
void transform_2d(const T* in, T* out, F f) {
  T t[RO][CI];
  for (int j = 0; j < CI; ++j) {
    T col[RI], res[RO];
    for (int i = 0; i < RI; ++i) col[i] = in[i * CI + j];
    f(col, res);
    for (int i = 0; i < RO; ++i) t[i][j] = res[i];
  }
  for (int i = 0; i < RO; ++i) f(t[i], out + i * CO);
}

}  // namespace hpcnn::cpu::winograd
