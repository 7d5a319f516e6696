// The arithmetic of the fixed-order sums over a model's variables (param_norms.h), as HPCNN_HD
// code that the CPU op, the CUDA kernels and the host self-test all run.
//
// Per segment (param_segments.h): lane l (0 <= l < kSegmentLanes) adds |x| and x^2 of the elements
// begin + l, begin + l + kSegmentLanes, ... in that order, in double; then the lanes are added as a
// binary tree (lane l += lane l + h for h = kSegmentLanes/2, ..., 1). On the GPU a lane is a thread
// of the segment's block; on the CPU a loop. Squares of floats are exact in double, so a fused
// multiply-add gives the same sum as a multiply then an add: both backends get the same bits.
// Per variable: its segments' sums in table order. The consumers (clip scales, the penalty) then
// run on one thread, in variable order.
#pragma once

#include <cmath>

#include "core/hd.h"
#include "ops/param_segments.h"

namespace hpcnn::body {

// Lane `lane`'s sums over segment s of x.
HPCNN_HD void segment_lane_sums(const float* x, const ParamSegment& s, int lane, double& sum_abs, double& sum_sq) {
  double a = 0.0, q = 0.0;
  for (long long i = s.begin + lane; i < s.end; i += kSegmentLanes) {
    const double v = x[i];
    a += fabs(v);
    q += v * v;
  }
  sum_abs = a;
  sum_sq = q;
}

// One level of the lanes' tree: lane l (< half) takes in lane l + half.
HPCNN_HD void tree_level(double* lanes_abs, double* lanes_sq, int l, int half) {
  lanes_abs[l] += lanes_abs[l + half];
  lanes_sq[l] += lanes_sq[l + half];
}

// Per-variable sums from the segments' sums (partial[2s] = sum |x|, partial[2s+1] = sum x^2):
// sums[2v], sums[2v+1], each the variable's segments added in table order.
HPCNN_HD void variable_sums_from_segments(const ParamSegment* segs, int nseg, const double* partial, int nvar,
                                          double* sums) {
  for (int v = 0; v < nvar; ++v) sums[2 * v] = sums[2 * v + 1] = 0.0;
  for (int s = 0; s < nseg; ++s) {
    sums[2 * segs[s].variable] += partial[2 * s];
    sums[2 * segs[s].variable + 1] += partial[2 * s + 1];
  }
}

enum ClipMode : int { kClipNorm = 0, kGlobalClipNorm = 1 };

// Keras' clip factors from the gradients' per-variable sums of squares (sums as above):
//   kClipNorm        variable v: clipnorm / max(||g_v||, clipnorm)   (1 when the norm is below)
//   kGlobalClipNorm  every variable: clipnorm * min(1 / ||g||, 1 / clipnorm), ||g|| over all of
//                    them (added in variable order); NaN when ||g|| is inf or NaN, as in Keras
HPCNN_HD void clip_scales_from_sums(const double* sums, int nvar, int mode, double clipnorm, float* scales) {
  if (mode == kClipNorm) {
    for (int v = 0; v < nvar; ++v) {
      const double norm = sqrt(sums[2 * v + 1]);
      const double denom = (norm > clipnorm || norm != norm) ? norm : clipnorm;  // NaN propagates
      scales[v] = static_cast<float>(clipnorm / denom);
    }
    return;
  }
  double total = 0.0;
  for (int v = 0; v < nvar; ++v) total += sums[2 * v + 1];
  const double norm = sqrt(total);
  const double inv = 1.0 / norm, inv_clip = 1.0 / clipnorm;
  const double scale = clipnorm * (inv < inv_clip ? inv : inv_clip) + (norm - norm);
  for (int v = 0; v < nvar; ++v) scales[v] = static_cast<float>(scale);
}

// The weight penalty of Keras' regularizers, added to *penalty: over the variables in order, each
// l1 * sum |w| + l2 * sum w^2 (a factor that is 0 adds nothing, as Keras' L1L2 skips it).
HPCNN_HD void penalty_from_sums(const ParamSegment* segs, int nseg, const double* sums, double* penalty) {
  double total = 0.0;
  int last = -1;
  for (int s = 0; s < nseg; ++s) {
    const int v = segs[s].variable;
    if (v == last) continue;  // a variable's segments are adjacent and share its factors
    last = v;
    // fma written out: a compiler may not contract it differently on the two backends
    double pv = 0.0;
    if (segs[s].l1 != 0.f) pv = static_cast<double>(segs[s].l1) * sums[2 * v];
    if (segs[s].l2 != 0.f) pv = fma(static_cast<double>(segs[s].l2), sums[2 * v + 1], pv);
    total += pv;
  }
  *penalty += total;
}

}  // namespace hpcnn::body
