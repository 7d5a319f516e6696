// HPCNN_HD marks functions compiled for both the host and the device. Element-wise math lives
// in such functions so that the CPU path, which CI runs, tests the very code the GPU runs.
#pragma once

#if defined(__CUDACC__)
#define HPCNN_HD __host__ __device__ __forceinline__
#else
#define HPCNN_HD inline
#endif
