// Sizes that a file declares are untrusted: a damaged or hostile header can claim 2^62 rows in a
// file of two kilobytes. Everything the data pipeline allocates from such a size goes through these
// checks first: products that cannot overflow, and the memory this process can really get, so that
// a bad file gives a clear exception naming it instead of std::bad_alloc, the OOM killer, or swap.
#pragma once

#include <cstdint>
#include <string>

namespace hpcnn::data {

// out = a * b; false when the product does not fit in 63 bits (every size stays representable as
// a long long and a size_t).
bool checked_mul(uint64_t a, uint64_t b, uint64_t& out);
// out = a + b; false past 63 bits.
bool checked_add(uint64_t a, uint64_t b, uint64_t& out);

// "1.5 GiB", "312 bytes".
std::string bytes_str(uint64_t bytes);

// Bytes this process can still allocate: the least of the kernel's MemAvailable, the memory limit
// of its cgroup (v2 or v1, walking up to the job's limit under Slurm) minus the usage, and the
// address-space and data limits (ulimit -v, -d) minus what is mapped. UINT64_MAX when none is known.
uint64_t available_memory();

// Throws OutOfMemory (Python MemoryError) "<what> needs <need> of memory, but only <available> is
// available" when need exceeds available_memory().
void require_memory(uint64_t need, const std::string& what);

}  // namespace hpcnn::data
