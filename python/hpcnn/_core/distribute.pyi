# Generated from the installed hpcnn._core by tools/gen_core_stubs.py: do not edit by hand.
# After changing csrc/bindings/ and reinstalling, regenerate with: python tools/gen_core_stubs.py
"""data parallelism: replica groups over MPI, NCCL or threads (hpcnn.distribute)"""
import collections.abc
import numpy
import numpy.typing
import typing
default_bucket_bytes: int

class Group:
    """Replicas that train one model data-parallel (made by hpcnn.distribute's strategies)."""

    def abort(self, why: str) -> None:
        """Stops the group: the other replicas' pending and later calls raise, naming this one."""

    @staticmethod
    def across_processes(device: str, implementation: str='auto', timeout_seconds: typing.SupportsFloat | typing.SupportsIndex=600.0, heartbeat_seconds: typing.SupportsFloat | typing.SupportsIndex=30.0) -> Group:
        ...

    def allreduce_host(self, values: typing.Annotated[numpy.typing.ArrayLike, numpy.float64]) -> numpy.typing.NDArray[numpy.float64]:
        """The sum over every rank of float64 `values` (collective)."""

    def barrier(self) -> None:
        ...

    def broadcast_host(self, data: bytes, root: typing.SupportsInt | typing.SupportsIndex=0) -> bytes:
        """Rank `root`'s bytes, on every rank (collective)."""

    @property
    def devices(self) -> list[str]:
        ...

    @property
    def failed(self) -> bool:
        ...

    @property
    def first_replica(self) -> int:
        ...

    @property
    def heartbeat_seconds(self) -> float:
        ...

    @staticmethod
    def in_process(devices: collections.abc.Sequence[str], implementation: str='auto', timeout_seconds: typing.SupportsFloat | typing.SupportsIndex=600.0) -> Group:
        ...

    @property
    def local_size(self) -> int:
        ...

    @property
    def multi_process(self) -> bool:
        ...

    @property
    def size(self) -> int:
        ...

    @property
    def timeout_seconds(self) -> float:
        ...

    @property
    def transport(self) -> str:
        ...

def default_heartbeat_seconds() -> float:
    """How long an MPI rank may be silent before the others take it for lost: HPCNN_DIST_HEARTBEAT seconds when set (0: no heartbeat), else 30."""

def default_timeout_seconds() -> float:
    """A collective's time limit: HPCNN_DIST_TIMEOUT seconds when set, else 600."""

def inject_failure(replica: typing.SupportsInt | typing.SupportsIndex, stall_seconds: typing.SupportsFloat | typing.SupportsIndex=0.0) -> None:
    """Test-only: replica `replica` (global index, in this process) fails once at its next training step, after its loss statistics were summed and before its first gradient bucket: it raises, or with stall_seconds > 0 it sleeps that long there instead (a stuck replica)."""

def inject_nccl_async_error(replica: typing.SupportsInt | typing.SupportsIndex) -> None:
    """Test-only: the NCCL communicator of replica `replica` (global index, in this process) reports ncclSystemError at its next wait for a gradient sum, as after a network failure (once)."""

def inject_nccl_setup_failure(rank: typing.SupportsInt | typing.SupportsIndex) -> None:
    """Test-only: MPI rank `rank` (this process) fails in its next NCCL setup, after the unique id arrived and before its communicator exists (once)."""

def mpi_compiled() -> bool:
    """Whether this build has MPI (MultiWorkerMirroredStrategy)."""

def mpi_init() -> dict:
    """Initialises MPI unless it is (collective: every rank calls it); rank, size, local rank and size, host."""

def mpi_initialized() -> bool:
    ...

def mpi_library_version() -> str:
    """The MPI library's version string ('' without MPI)."""

def mpi_shutdown() -> None:
    """At exit: MPI_Finalize if hpcnn initialised MPI; after a failure, the acknowledgements and MPI_Abort."""

def mpi_standard_version() -> str:
    ...

def mpi_unavailable_reason() -> str:
    """Why MPI cannot be used ('' when it can)."""

def nccl_compiled() -> bool:
    """Whether this build has NCCL (GPU gradient sums)."""

def nccl_unavailable_reason() -> str:
    """Why NCCL cannot be used ('' when it can)."""

def nccl_version() -> str:
    """The NCCL library's version ('' without NCCL)."""

def plan_buckets(layer_ranges: collections.abc.Sequence[tuple[typing.SupportsInt | typing.SupportsIndex, typing.SupportsInt | typing.SupportsIndex]], bucket_bytes: typing.SupportsInt | typing.SupportsIndex) -> list:
    """The gradient buckets (begin, end, closing layer) for per-layer (begin, end) ranges of the gradient buffer, in the order they are summed."""

def share_range(rows: typing.SupportsInt | typing.SupportsIndex, replicas: typing.SupportsInt | typing.SupportsIndex, replica: typing.SupportsInt | typing.SupportsIndex) -> tuple[int, int]:
    """Rows [begin, end) of a global batch of `rows` that replica `replica` of `replicas` takes."""
