// Where the first NaN or infinity of a host float array is. The input and target checks run it on
// every batch before the step (a NaN input would otherwise train silently into NaN weights), so it
// must cost little next to the step: a branch-free scan that vectorizes, on hpcnn's threads.
#pragma once

namespace hpcnn::cpu {

// Index of the first non-finite value of p[0, n), or -1 when all are finite.
long long first_non_finite(const float* p, long long n);

}  // namespace hpcnn::cpu
