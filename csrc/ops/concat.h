// Concatenation along an axis (the Concatenate layer) and its backward, the split. Seen as rows:
// a tensor of shape (d0, ..., dk, ...) concatenated along axis k is `outer` = d0 * ... * d(k-1)
// rows of `width` = dk * ... elements; input i's rows are columns [offset_i, offset_i + width_i)
// of the output's rows (for NHWC and the channel axis: each pixel's channels side by side). Both
// directions are one primitive: copy `rows` rows of `width` elements between two row pitches.
// A plain copy of a contiguous tensor on its device is the same primitive with equal pitches.
// CPU: concat_cpu.cpp; CUDA: concat_cuda.cu.
#pragma once

namespace hpcnn {

namespace cpu {
// dst[r * dst_pitch + c] = src[r * src_pitch + c] for r < rows, c < width (elements).
void copy_rows(long long rows, long long width, const float* src, long long src_pitch, float* dst,
               long long dst_pitch);
}  // namespace cpu

namespace cuda {
void copy_rows(int device, long long rows, long long width, const float* src, long long src_pitch, float* dst,
               long long dst_pitch);
}  // namespace cuda

}  // namespace hpcnn
