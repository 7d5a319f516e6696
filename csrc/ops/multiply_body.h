// The index arithmetic of the broadcast product (multiply.h), shared by both backends and the host
// self-test: where element i of y reads its operands, and, for a broadcast operand, which
// positions of y its element j gathers.
#pragma once

#include "core/hd.h"
#include "ops/multiply.h"

namespace hpcnn::cuda::body {

// Offsets into a (oa) and b (ob) of y's element i.
HPCNN_HD void broadcast_offsets(const BroadcastGeometry& g, long long i, long long& oa, long long& ob) {
  oa = ob = 0;
  for (int d = g.rank - 1; d >= 0; --d) {
    const long long idx = i % g.dims[d];
    i /= g.dims[d];
    oa += idx * g.sa[d];
    ob += idx * g.sb[d];
  }
}

// An operand's view: its own dims (1 on a broadcast axis), for gathering its gradient.
// For element j of operand s (strides s: 0 on broadcast axes), the k-th of the y positions it
// covers (k < y.numel() / operand numel, in row-major order of the broadcast axes) is y index
// gather_index(g, s, j, k).
HPCNN_HD long long gather_index(const BroadcastGeometry& g, const long long* s, long long j, long long k) {
  long long yi = 0, stride = 1;
  for (int d = g.rank - 1; d >= 0; --d) {
    long long idx;
    if (s[d] == 0 && g.dims[d] > 1) {  // broadcast axis: walked by k
      idx = k % g.dims[d];
      k /= g.dims[d];
    } else {  // the operand's own axis: from j
      idx = j % g.dims[d];
      j /= g.dims[d];
    }
    yi += idx * stride;
    stride *= g.dims[d];
  }
  return yi;
}

}  // namespace hpcnn::cuda::body
