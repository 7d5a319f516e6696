// The CBLAS the build found (OpenBLAS by default; MKL or BLIS accepted), seen through one
// row-major sgemm. The BLAS is kept single-threaded: hpcnn's own threads split the work around
// it, so BLAS threads never nest inside hpcnn threads and results do not depend on the BLAS's
// thread scheduling.
#pragma once

#include <string>

namespace hpcnn::blas {

// Called once at import: pins the BLAS to one thread.
void init();
// C[M,N] = alpha * op(A) * op(B) + beta * C, row-major; op(A) is M x K, op(B) is K x N.
void sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
           int ldb, float beta, float* c, int ldc);
std::string vendor();   // "OpenBLAS"
std::string library();  // path the build linked
std::string config();   // the library's own build string where it offers one
int threads();          // the BLAS's own thread setting (1 after init)

}  // namespace hpcnn::blas
