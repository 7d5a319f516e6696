// The broadcast product on the CPU (multiply.h): per sample, rows of y's last axis; operand rows
// are contiguous (or one value repeated when the last axis is broadcast), so the inner loops are
// plain vector loops.
#include <algorithm>
#include <cstring>

#include "core/thread_pool.h"
#include "ops/multiply.h"
#include "ops/multiply_body.h"

namespace hpcnn::cpu {

namespace body = cuda::body;

namespace {

// y rows per sample, the row length, and the operands' row offsets of a row r of sample n.
struct Rows {
  long long per_sample, len;
};
Rows rows_of(const BroadcastGeometry& g) {
  const long long len = g.dims[g.rank - 1];
  return {g.numel() / g.dims[0] / len, len};
}

// The element offsets of row r (a y index of r * len) for both operands.
void row_offsets(const BroadcastGeometry& g, long long row, long long len, long long& oa, long long& ob) {
  body::broadcast_offsets(g, row * len, oa, ob);
}

}  // namespace

void multiply_forward(const BroadcastGeometry& g, const float* a, const float* b, float* y) {
  const Rows r = rows_of(g);
  const long long sa = g.sa[g.rank - 1], sb = g.sb[g.rank - 1];
  parallel_for(g.dims[0] * r.per_sample, [&](long long r0, long long r1, int) {
    for (long long row = r0; row < r1; ++row) {
      long long oa, ob;
      row_offsets(g, row, r.len, oa, ob);
      const float* __restrict__ pa = a + oa;
      const float* __restrict__ pb = b + ob;
      float* __restrict__ py = y + row * r.len;
      if (sa && sb) {
        for (long long k = 0; k < r.len; ++k) py[k] = pa[k] * pb[k];
      } else if (sa) {
        const float v = pb[0];
        for (long long k = 0; k < r.len; ++k) py[k] = pa[k] * v;
      } else if (sb) {
        const float v = pa[0];
        for (long long k = 0; k < r.len; ++k) py[k] = v * pb[k];
      } else {
        std::fill(py, py + r.len, pa[0] * pb[0]);
      }
    }
  }, 8);
}

void multiply_backward(const BroadcastGeometry& g, const float* a, const float* b, const float* dy, float* da,
                       long long a_numel, float* db, long long b_numel) {
  const Rows r = rows_of(g);
  const long long n = g.dims[0];
  const long long sa = g.sa[g.rank - 1], sb = g.sb[g.rank - 1];
  const long long a_sample = a_numel / n, b_sample = b_numel / n;
  const bool a_full = a_numel == g.numel(), b_full = b_numel == g.numel();
  // One sample per task: a broadcast operand's gradient is summed within its sample, rows in order.
  parallel_for(n, [&](long long n0, long long n1, int) {
    for (long long s = n0; s < n1; ++s) {
      if (da && !a_full) std::fill(da + s * a_sample, da + (s + 1) * a_sample, 0.f);
      if (db && !b_full) std::fill(db + s * b_sample, db + (s + 1) * b_sample, 0.f);
      for (long long row = s * r.per_sample; row < (s + 1) * r.per_sample; ++row) {
        long long oa, ob;
        row_offsets(g, row, r.len, oa, ob);
        const float* __restrict__ pdy = dy + row * r.len;
        // d(operand) row += dy row * other row; a broadcast last axis sums the row into one value.
        auto grad = [&](float* d, long long od, long long sd, const float* other, long long oo, long long so,
                        bool full) {
          float* __restrict__ pd = d + od;
          const float* __restrict__ po = other + oo;
          if (sd) {
            if (full && so) {
              for (long long k = 0; k < r.len; ++k) pd[k] = pdy[k] * po[k];
            } else if (full) {
              for (long long k = 0; k < r.len; ++k) pd[k] = pdy[k] * po[0];
            } else if (so) {
              for (long long k = 0; k < r.len; ++k) pd[k] += pdy[k] * po[k];
            } else {
              for (long long k = 0; k < r.len; ++k) pd[k] += pdy[k] * po[0];
            }
          } else {
            float t = 0.f;
            for (long long k = 0; k < r.len; ++k) t += pdy[k] * po[so ? k : 0];
            if (full) pd[0] = t;  // (a last axis of length 1)
            else pd[0] += t;
          }
        };
        if (da) grad(da, oa, sa, b, ob, sb, a_full);
        if (db) grad(db, ob, sb, a, oa, sa, b_full);
      }
    }
  });
}

}  // namespace hpcnn::cpu
