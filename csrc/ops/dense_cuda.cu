// Dense on the GPU: cuBLAS sgemm on row-major data through the column-major identity
// (A B)^T = B^T A^T: a row-major (r x c) array IS the column-major (c x r) array of its
// transpose, with leading dimension c. So, with x (N, in), w (in, out), y (N, out) row-major:
//   forward : y^T (out x N) = w^T (out x in) * x^T (in x N)
//             sgemm(N, N, m=out, n=N, k=in, w, lda=out, x, ldb=in, y, ldc=out)
//   dW      : dW^T (out x in) = dy^T (out x N) * x (N x in)
//             sgemm(N, T, m=out, n=in, k=N, dy, lda=out, x, ldb=in, dW, ldc=out)
//   dx      : dx^T (in x N) = w (in x out) * dy^T (out x N)
//             sgemm(T, N, m=in, n=N, k=out, w, lda=out, dy, ldb=out, dx, ldc=in)
// (cuBLAS: C = alpha op(A) op(B) + beta C, op(A) m x k, op(B) k x n, C m x n, all column-major;
// lda >= m for op N, >= k for op T. alpha/beta are host floats: CUBLAS_POINTER_MODE_HOST.)
// beta = 0: C is not read. Bias/ReLU and db are our kernels (db: deterministic column sums).
// TF32: the context sets CUBLAS_TF32_TENSOR_OP_MATH on the handle when on (cuda_context.cu).
#include "core/cuda_context.h"
#include "ops/cuda_kernels.h"
#include "ops/dense.h"
#include "ops/dense_body.h"

namespace hpcnn::cuda {

namespace {
void sgemm(cublasHandle_t h, const body::Gemm& g) {
  const float one = 1.f, zero = 0.f;
  HPCNN_CUBLAS_CHECK(cublasSgemm(h, g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, g.m,
                                 g.n, g.k, &one, g.a, g.lda, g.b, g.ldb, &zero, g.c, g.ldc));
}
}  // namespace

void dense_forward(int device, const DenseGeometry& g, const float* x, const float* w, const float* b, float* y,
                   bool relu) {
  ContextLock ctx(device);
  sgemm(ctx->cublas.h, body::dense_forward_gemm(g, x, w, y));
  kernels::bias_act(ctx.stream(), y, g.n, g.out, b, relu);
}

void dense_backward(int device, const DenseGeometry& g, const float* x, const float* w, const float* y, float* dy,
                    float* dx, float* dw, float* db, bool relu) {
  ContextLock ctx(device);
  cudaStream_t s = ctx.stream();
  ScratchPlan plan;
  size_t o_part = plan.add<float>(kernels::column_sum_partials(g.out));
  char* base = plan.reserve(*ctx, "dense backward");
  if (relu) kernels::relu_mask(s, dy, y, (long long)g.n * g.out);
  if (db) kernels::column_sum(s, dy, g.n, g.out, ScratchPlan::at<float>(base, o_part), db);
  sgemm(ctx->cublas.h, body::dense_dw_gemm(g, x, dy, dw));
  if (dx) sgemm(ctx->cublas.h, body::dense_dx_gemm(g, w, dy, dx));
}

}  // namespace hpcnn::cuda
