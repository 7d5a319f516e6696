#include "ops/blas.h"

#include <cblas.h>

#if defined(HPCNN_BLAS_OPENBLAS)
extern "C" {
void openblas_set_num_threads(int);
int openblas_get_num_threads(void);
char* openblas_get_config(void);
}
#elif defined(HPCNN_BLAS_MKL)
extern "C" {
void MKL_Set_Num_Threads(int);
int MKL_Get_Max_Threads(void);
}
#endif

namespace hpcnn::blas {

void init() {
#if defined(HPCNN_BLAS_OPENBLAS)
  openblas_set_num_threads(1);
#elif defined(HPCNN_BLAS_MKL)
  MKL_Set_Num_Threads(1);
#endif
}

void sgemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
           float beta, float* c, int ldc) {
  if (m <= 0 || n <= 0) return;
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda,
              b, ldb, beta, c, ldc);
}

std::string vendor() { return HPCNN_BLAS_VENDOR; }
std::string library() { return HPCNN_BLAS_LIBRARY; }

std::string config() {
#if defined(HPCNN_BLAS_OPENBLAS)
  const char* c = openblas_get_config();
  return c ? c : "";
#else
  return "";
#endif
}

int threads() {
#if defined(HPCNN_BLAS_OPENBLAS)
  return openblas_get_num_threads();
#elif defined(HPCNN_BLAS_MKL)
  return MKL_Get_Max_Threads();
#else
  return 1;
#endif
}

}  // namespace hpcnn::blas
