// The fixed-order sums of param_norms.h on the CPU: segments in parallel (each in the lane order of
// param_norms_body.h, which the GPU's blocks follow too), then the per-variable and final steps on
// the calling thread.
#include <algorithm>
#include <vector>

#include "core/thread_pool.h"
#include "ops/elementwise.h"
#include "ops/param_norms.h"
#include "ops/param_norms_body.h"

namespace hpcnn::cpu {

namespace {

constexpr long long kSegmentsPerThread = 4;  // below this, fewer threads: too little work to share

// partial[2s], partial[2s+1]: sum |x| and sum x^2 of segment s.
std::vector<double> segment_partials(const ParamSegment* segs, int nseg, const float* x) {
  std::vector<double> partial(2 * static_cast<size_t>(nseg));
  parallel_for(nseg, [&](long long b, long long e, int) {
    double lanes_abs[kSegmentLanes], lanes_sq[kSegmentLanes];
    for (long long s = b; s < e; ++s) {
      for (int l = 0; l < kSegmentLanes; ++l) body::segment_lane_sums(x, segs[s], l, lanes_abs[l], lanes_sq[l]);
      for (int half = kSegmentLanes / 2; half > 0; half /= 2)
        for (int l = 0; l < half; ++l) body::tree_level(lanes_abs, lanes_sq, l, half);
      partial[2 * s] = lanes_abs[0];
      partial[2 * s + 1] = lanes_sq[0];
    }
  }, kSegmentsPerThread);
  return partial;
}

std::vector<double> sums_of(const ParamSegment* segs, int nseg, int nvar, const float* x) {
  const std::vector<double> partial = segment_partials(segs, nseg, x);
  std::vector<double> sums(2 * static_cast<size_t>(nvar));
  body::variable_sums_from_segments(segs, nseg, partial.data(), nvar, sums.data());
  return sums;
}

}  // namespace

void variable_sums(const ParamSegment* segs, int nseg, int nvar, const float* x, double* sums) {
  const std::vector<double> s = sums_of(segs, nseg, nvar, x);
  std::copy(s.begin(), s.end(), sums);
}

void clip_scales(const ParamSegment* segs, int nseg, int nvar, const float* g, int mode, double clipnorm,
                 float* scales) {
  const std::vector<double> s = sums_of(segs, nseg, nvar, g);
  body::clip_scales_from_sums(s.data(), nvar, mode, clipnorm, scales);
}

void weight_penalty(const ParamSegment* segs, int nseg, int nvar, const float* w, float* grads, double* penalty) {
  if (penalty) {
    const std::vector<double> s = sums_of(segs, nseg, nvar, w);
    body::penalty_from_sums(segs, nseg, s.data(), penalty);
  }
  if (!grads) return;
  parallel_for(nseg, [&](long long b, long long e, int) {
    for (long long s = b; s < e; ++s) {
      const ParamSegment& sg = segs[s];
      for (long long i = sg.begin; i < sg.end; ++i) grads[i] += ew::penalty_gradient(w[i], sg.l1, sg.l2);
    }
  }, kSegmentsPerThread);
}

}  // namespace hpcnn::cpu
