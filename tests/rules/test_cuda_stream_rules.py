"""Source rules of the CUDA backend that no test without a GPU could see at run time.

Device memory is zeroed on a stream (cudaMemsetAsync on the stream of the work that reads it), never
with cudaMemset: that one runs on the legacy default stream, which the non-blocking streams (NCCL's,
csrc/distribute/nccl_communicator.cu) do not wait for, so a collective could read the buffer before
it is zeroed. The synchronous copies of core/cuda_runtime.cu (Tensor::copy_from) are on the legacy
stream on purpose (core/cuda_context.h explains why) and are not in the collectives' code."""
import re
from pathlib import Path
from tests.support import paths

CSRC = paths.ROOT / "csrc"


def code_lines(path):
    """(number, line) of a C++/CUDA file, comments removed (// to the end of the line)."""
    for i, line in enumerate(path.read_text().splitlines(), 1):
        yield i, line.split("//", 1)[0]


def sources():
    return sorted(p for p in CSRC.rglob("*") if p.suffix in (".cu", ".cpp", ".h"))


def test_no_device_memset_on_the_legacy_default_stream():
    bad = [f"{p.relative_to(CSRC)}:{i}: {line.strip()}" for p in sources() for i, line in code_lines(p)
           if re.search(r"\bcudaMemset(2D|3D)?\s*\(", line)]
    assert not bad, "zero device memory with cudaMemsetAsync on the stream that reads it:\n" + "\n".join(bad)


def test_the_collectives_code_makes_no_legacy_stream_copy_or_memset():
    bad = [f"{p.relative_to(CSRC)}:{i}: {line.strip()}" for p in sorted((CSRC / "distribute").iterdir())
           if p.suffix in (".cu", ".cpp", ".h") for i, line in code_lines(p)
           if re.search(r"\bcuda(Memcpy|Memset)(2D|3D|Peer)?\s*\(", line)]
    assert not bad, "\n".join(bad)


def test_the_nccl_warm_up_zeroes_its_buffers_on_the_communicators_stream():
    # DeviceFloats lives with the transport's other owners (nccl_handles.h); the warm-up that makes
    # them is in the communicator.
    handles = (CSRC / "distribute" / "nccl_handles.h").read_text()
    text = (CSRC / "distribute" / "nccl_communicator.cu").read_text()
    assert "cudaMemsetAsync(p, 0, count * sizeof(float), stream)" in handles
    assert re.search(r"make_unique<DeviceFloats>\([^;]*c->stream\(\)\)", text)
