"""Data-parallel training with TensorFlow's ``tf.distribute`` names.

    strategy = hpcnn.distribute.MirroredStrategy()             # this process, all visible GPUs
    strategy = hpcnn.distribute.MultiWorkerMirroredStrategy()  # one process per rank (srun / mpirun)
    with strategy.scope():
        model = hpcnn.Sequential([...])
        model.compile('adam', 'categorical_crossentropy', ['accuracy'])
    model.fit(x, y, epochs=10, batch_size=512)                 # batch_size is the global batch

Every replica holds the whole model. Each global batch is split into one contiguous share per
replica (replica r of R takes rows [r*B//R, (r+1)*B//R)); each replica runs forward and backward on
its share, the gradients are summed over the replicas (in buckets, started while the backward pass
of earlier layers still runs) and every replica takes the same optimizer step. The loss gradient of
each replica is scaled by 1 / (global batch rows), and dropout's masks are keyed by a sample's row
in the global batch, so R replicas x B/R rows compute what one device computes for B rows, up to
the order of float sums: the numbers do not depend on the replica count.

Transports (the engines of HPC centres, never a home-made network protocol): NCCL between GPUs,
MPI between processes (``MPI_Allreduce`` in place for CPU ranks; NCCL bootstrapped over MPI for GPU
ranks), and a rendezvous of threads for CPU replicas of one process
(``MirroredStrategy(["cpu", "cpu"])``, which tests the split and sum logic on any machine).

BatchNormalization: each replica normalizes its own share of the batch with that share's
statistics, as Keras' ``MirroredStrategy`` does (not a synchronized batch norm); the moving
statistics are averaged over the replicas after every step, so every replica (and every saved
file) holds the same weights.

Multi-process runs: only the chief (rank 0) prints progress and writes files (``model.save``,
``save_weights``, ModelCheckpoint, BackupAndRestore, CSVLogger do nothing on the other ranks);
every rank reads (a resumed run restores the same backup on every rank). A rank that fails stops the
others with an error naming it (``HPCNN_DIST_TIMEOUT`` seconds, default 600, bounds any wait). A rank
killed without a word (SIGKILL, a failed node) is noticed by a heartbeat within
``HPCNN_DIST_HEARTBEAT`` seconds (default 30), however long a step takes: every other rank prints
which rank was lost and at which step, and exits non-zero (docs/distributed.md, "Failure detection").
"""
from __future__ import annotations

import atexit
import os
import contextlib
import contextvars
import json
import platform
from typing import Any, Dict, Iterator, List, Optional, Sequence

import numpy as np

from . import _core, validation
from .devices import normalize as normalize_device

_dist = _core.distribute

_scope: contextvars.ContextVar[Optional["Strategy"]] = contextvars.ContextVar("hpcnn_strategy", default=None)

#: Gradient bucket size when none is given: the tutorial CNN's 3.2 MB of gradients then take two
#: collectives per step, the first started while the first convolutions' backward still runs.
DEFAULT_BYTES_PER_PACK = int(_core.distribute.default_bucket_bytes)

_IMPLEMENTATIONS = ("auto", "host", "mpi", "nccl")


class CommunicationOptions:
    """How replicas sum their gradients (``tf.distribute.experimental.CommunicationOptions``).

    Parameters
    ----------
    bytes_per_pack : int or None
        Gradient bucket size in bytes (None: 2 MiB; 0: one bucket for the whole model, no overlap
        with the backward pass).
    timeout_seconds : float or None
        How long any collective may wait before it is an error (None: ``HPCNN_DIST_TIMEOUT`` or 600).
    implementation : str
        'auto' (NCCL for GPUs when built, MPI between CPU processes, threads within one), 'host',
        'mpi' or 'nccl'.
    heartbeat_seconds : float or None
        MultiWorkerMirroredStrategy: a rank whose heartbeat has been silent that long is lost, and
        every other rank stops (None: ``HPCNN_DIST_HEARTBEAT`` or 30; 0: no heartbeat, a killed rank
        is then noticed after timeout_seconds only). It bounds no step: a slow step still beats.
    """

    def __init__(self, bytes_per_pack: Optional[int] = None, timeout_seconds: Optional[float] = None,
                 implementation: str = "auto", heartbeat_seconds: Optional[float] = None) -> None:
        self.bytes_per_pack = validation.integer(bytes_per_pack, "bytes_per_pack", "CommunicationOptions",
                                                 minimum=0, maximum=None, allow_none=True)
        if timeout_seconds is not None:
            timeout_seconds = validation.number(timeout_seconds, "timeout_seconds", "CommunicationOptions",
                                                low=0.0, low_open=True, expected="a number of seconds > 0")
        self.timeout_seconds = timeout_seconds
        if heartbeat_seconds is not None:
            heartbeat_seconds = validation.number(heartbeat_seconds, "heartbeat_seconds", "CommunicationOptions",
                                                  low=0.0, expected="a number of seconds >= 0 (0: no heartbeat)")
        self.heartbeat_seconds = heartbeat_seconds
        if not isinstance(implementation, str) or implementation.lower() not in _IMPLEMENTATIONS:
            raise ValueError(f"CommunicationOptions: implementation must be one of {list(_IMPLEMENTATIONS)}, "
                             f"got {implementation!r}")
        self.implementation = implementation.lower()

    def __repr__(self) -> str:
        return (f"CommunicationOptions(bytes_per_pack={self.bytes_per_pack!r}, "
                f"timeout_seconds={self.timeout_seconds!r}, implementation={self.implementation!r}, "
                f"heartbeat_seconds={self.heartbeat_seconds!r})")


def _options(options: Optional[CommunicationOptions], caller: str) -> CommunicationOptions:
    if options is None:
        return CommunicationOptions()
    if not isinstance(options, CommunicationOptions):
        raise ValueError(f"{caller}: communication_options must be a CommunicationOptions, got "
                         f"{type(options).__name__}")
    return options


class Strategy:
    """What the strategies share: the replica group, ``scope()``, and who the chief is."""

    def __init__(self, group: Any, options: CommunicationOptions, world: Optional[Dict[str, Any]]) -> None:
        self._group = group
        self._options = options
        self._world = world  # MPI's rank, size, local rank, host (multi-process only)
        self._bytes_per_pack = DEFAULT_BYTES_PER_PACK if options.bytes_per_pack is None else options.bytes_per_pack

    # ---- Keras / TensorFlow names
    @property
    def num_replicas_in_sync(self) -> int:
        """Replicas that take a share of every global batch, over all processes."""
        return int(self._group.size)

    @contextlib.contextmanager
    def scope(self) -> Iterator["Strategy"]:
        """Models created or compiled in this block train with this strategy."""
        token = _scope.set(self)
        try:
            yield self
        finally:
            _scope.reset(token)

    # ---- where this process stands
    @property
    def worker_index(self) -> int:
        """This process's rank (0 for a single-process strategy)."""
        return int(self._world["rank"]) if self._world else 0

    @property
    def num_workers(self) -> int:
        """Processes taking part (1 for a single-process strategy)."""
        return int(self._world["size"]) if self._world else 1

    @property
    def is_chief(self) -> bool:
        """Whether this process is rank 0: the one that prints progress and writes files."""
        return self.worker_index == 0

    @property
    def local_devices(self) -> List[str]:
        """The devices of this process's replicas."""
        return list(self._group.devices)

    @property
    def implementation(self) -> str:
        """The transport that sums gradients: 'host', 'mpi' or 'nccl'."""
        return str(self._group.transport)

    @property
    def bytes_per_pack(self) -> int:
        return self._bytes_per_pack

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(replicas={self.num_replicas_in_sync}, devices={self.local_devices}, "
                f"implementation={self.implementation!r}"
                + (f", rank={self.worker_index} of {self.num_workers}" if self._world else "") + ")")

    # ---- hpcnn's own: what compile, fit and the callbacks ask of a strategy
    @property
    def multi_process(self) -> bool:
        """Whether the replicas are spread over processes (MPI ranks), not only this one's."""
        return bool(self._group.multi_process)

    def distribute(self, core: Any, description: Dict[str, Any], seed: int) -> int:
        """Makes a compiled core model (hpcnn._core.Model) train with this strategy: every rank
        must run the same build (``build_description()``) and have built and compiled the same
        model (`description`: its config, compile settings and seed, None when drawn at random; a
        RanksDisagree naming, per rank that differs from rank 0, the fields and both values, on
        every rank, before anything trains). Returns the seed the model must use: rank 0's when it
        was drawn at random."""
        if self.multi_process:
            self.agree(dict(build_description(), **{_MODEL_FIELDS.get(k, k): v for k, v in description.items()}))
            seed = self.broadcast_int(seed)
        core.distribute(self._group, self._bytes_per_pack)
        return seed

    def agree(self, description: Dict[str, Any]) -> None:
        """Every rank must give the same `description` (field name -> JSON-able value): else a
        RanksDisagree on every rank naming, for each rank that differs from rank 0, the fields
        and both values (collective: two host collectives when the ranks agree, two more when not)."""
        if not self.multi_process:
            return
        mine = json.dumps(description, sort_keys=True, default=str).encode()
        chief = self._group.broadcast_host(mine, 0)
        flags = np.zeros(self.num_workers)
        flags[self.worker_index] = 0.0 if chief == mine else 1.0
        flags = self._group.allreduce_host(flags)
        bad = [r for r in range(self.num_workers) if flags[r] > 0]
        if not bad:
            return
        # Only the first ranks that differ send their descriptions (all ranks differ when rank 0
        # is the odd one: the sum stays small), as bytes in float64 rows (exact) of one sum: the
        # longest first, so that every rank sizes the rows alike.
        shown = bad[:_RANKS_SHOWN]
        sizes = np.zeros(self.num_workers)
        sizes[self.worker_index] = len(mine)
        longest = int(self._group.allreduce_host(sizes)[shown].max())
        rows = np.zeros((len(shown), longest))
        if self.worker_index in shown:
            rows[shown.index(self.worker_index), :len(mine)] = np.frombuffer(mine, dtype=np.uint8)
        rows = self._group.allreduce_host(rows.ravel()).reshape(len(shown), longest)
        reference = json.loads(chief.decode())
        lines = []
        for i, r in enumerate(shown):
            other = json.loads(bytes(rows[i].astype(np.uint8)).rstrip(b"\0").decode())
            lines.append(f"rank {r}: " + "; ".join(_differences(other, reference, list(description))))
        if len(bad) > len(shown):
            lines.append(f"and {len(bad) - len(shown)} more ranks ({bad[len(shown)]}, ...)")
        raise RanksDisagree(f"{type(self).__name__}: every rank must run the same script, build and data "
                            "(refused on every rank, before the first step): " + " | ".join(lines))

    def broadcast_int(self, value: int) -> int:
        """Rank 0's `value` (an unsigned 64-bit integer) on every rank (collective)."""
        if not self.multi_process:
            return int(value)
        return int.from_bytes(self._group.broadcast_host(int(value).to_bytes(8, "little"), 0), "little")

    def any_rank(self, *flags: bool) -> List[bool]:
        """Per flag, whether it is set on any rank (collective; the flags themselves otherwise)."""
        if not self.multi_process:
            return [bool(f) for f in flags]
        sums = self._group.allreduce_host(np.array([1.0 if f else 0.0 for f in flags]))
        return [bool(v > 0) for v in sums]

    def abort(self, why: str) -> None:
        """This rank failed: the others' collectives raise, naming it."""
        if self.multi_process and not self._group.failed:
            self._group.abort(why)  # the transport names this rank ("rank 1 failed: ...")

    def shard(self) -> Optional[tuple]:
        """(rank, ranks) for a dataset that reads only this process's rows, or None."""
        return (self.worker_index, self.num_workers) if self.multi_process else None

    @property
    def group(self) -> Any:
        """The transport's group (hpcnn._core.distribute.Group): for benchmarks and tests."""
        return self._group


class RanksDisagree(ValueError):
    """Ranks that started with different models, builds or data (Strategy.agree). Raised on
    every rank at once, so no rank has to stop the others (fit does not abort the group for it)."""


# How many differing ranks the message details (Strategy.agree).
_RANKS_SHOWN = 8

# The model description's parts under the names the message gives them.
_MODEL_FIELDS = {"config": "model", "compile": "compile settings", "seed": "seed"}


def build_description() -> Dict[str, Any]:
    """What of this process's build and runtime must be the same on every rank (Strategy.agree):
    the hpcnn version (the same code: layers, collectives, file formats); the compiler and BLAS
    vendor (which kernels compute each replica's share: with different ones, the numbers would
    depend on which rank took which rows, not only on the global batch); whether CUDA and NCCL are
    built (the 'auto' transport is chosen from them: ranks that choose differently would wait in
    different collectives); the MPI library (ranks of different MPIs cannot talk); NumPy's
    version (its generators order shuffles and draw seeds) and Python's (JSON and hashing of the
    descriptions). Left out on purpose: BLAS's detected CPU core (DYNAMIC_ARCH; a cluster may mix
    CPU generations), thread counts, CUDA archs and library versions of one build's install (a
    node's driver may differ), HDF5's version (the bytes read are the file's)."""
    info = _core.build_info()
    return {"hpcnn version": info["version"], "compiler": info["compiler"], "BLAS": info["blas_vendor"],
            "CUDA": bool(info["cuda"]), "NCCL": bool(info["nccl"]), "MPI": info["mpi_library"],
            "NumPy": np.__version__, "Python": ".".join(platform.python_version_tuple()[:2])}


def _differences(other: Dict[str, Any], reference: Dict[str, Any], order: List[str]) -> List[str]:
    """'field value vs rank 0's value' for each field where `other` differs from rank 0's, in
    `order` (this rank's description's: the JSON compared had its keys sorted)."""
    out = []
    for field in order + [f for f in list(reference) + list(other) if f not in order]:
        a, b = other.get(field), reference.get(field)
        if a != b:
            where, a, b = _first_difference(a, b)
            out.append(f"{field}{where} {_short(a)} vs rank 0's {_short(b)}")
    return out


def _first_difference(a: Any, b: Any, where: str = "") -> tuple:
    """The path (' at layers[2].config.units') and values where two JSON values first differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(b) + [k for k in a if k not in b]:
            if a.get(k) != b.get(k):
                return _first_difference(a.get(k), b.get(k), f"{where}.{k}" if where else f" at {k}")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (u, v) in enumerate(zip(a, b)):
            if u != v:
                return _first_difference(u, v, f"{where}[{i}]" if where else f" at [{i}]")
    return where, a, b


def _short(value: Any) -> str:
    if value is None:
        return "(none)"  # a field this rank lacks, a seed drawn at random, rows a dataset does not know
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


class MirroredStrategy(Strategy):
    """Replicas on the devices of this process (TensorFlow's ``MirroredStrategy``). GPUs are
    summed with NCCL (one communicator per GPU, connected when the strategy is made) when this
    build has it. Works in Jupyter: no launcher needed.

    Parameters
    ----------
    devices : list of str or None
        None for one replica per visible GPU (``CUDA_VISIBLE_DEVICES``, what Slurm's ``--gres``
        grants), or one CPU replica where no GPU is usable (as TensorFlow does); or a list such as
        ``["gpu:0", "gpu:1"]`` or ``["cpu", "cpu"]`` (CPU replicas share the machine's cores and are
        summed by the host transport: for tests, and machines without GPUs).
    communication_options : CommunicationOptions or None
        How the replicas sum their gradients (default: ``CommunicationOptions()``).
    """

    def __init__(self, devices: Optional[Sequence[str]] = None,
                 communication_options: Optional[CommunicationOptions] = None) -> None:
        options = _options(communication_options, "MirroredStrategy")
        if devices is None:
            gpus = [f"gpu:{d.index}" for d in _core.cuda_devices()]
            names = gpus or ["cpu"]
        else:
            if isinstance(devices, (str, bytes)) or not isinstance(devices, (list, tuple)):
                raise ValueError(f"MirroredStrategy: devices must be a list such as ['gpu:0', 'gpu:1'], got "
                                 f"{devices!r}")
            if not devices:
                raise ValueError("MirroredStrategy: devices is empty")
            names = [normalize_device(d) for d in devices]
            gpus = [n for n in names if n != "cpu"]
            if len(set(gpus)) != len(gpus):
                raise ValueError(f"MirroredStrategy: a GPU appears twice in {list(devices)}")
        timeout = options.timeout_seconds or _dist.default_timeout_seconds()
        group = _dist.Group.in_process(names, options.implementation, timeout)
        super().__init__(group, options, None)


_mpi_shutdown_registered = False


# The launchers' own node-local rank, in the order they are looked for: Slurm's srun, Open MPI's
# mpirun, MPICH/Hydra's mpiexec. Each is set before the process starts, so the GPU is chosen from
# the launcher's numbering (the one Slurm's GPU binding uses) without asking MPI.
LOCAL_RANK_VARIABLES = ("SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID")


def local_rank(world: Dict[str, Any], environ: Optional[Dict[str, str]] = None) -> int:
    """This process's rank among the ranks of its node: the launcher's variable when one is set
    (``LOCAL_RANK_VARIABLES``), else MPI's (``world['local_rank']``, ranks sharing memory)."""
    env = os.environ if environ is None else environ
    for var in LOCAL_RANK_VARIABLES:
        value = env.get(var, "")
        if value.isdigit():
            return int(value)
    return int(world["local_rank"])


def default_rank_device(world: Dict[str, Any], environ: Optional[Dict[str, str]] = None,
                        gpu_count: Optional[int] = None) -> str:
    """The device of a rank that asked for none: the CPU where no GPU is visible, else local GPU
    ``local_rank % n`` of the ``n`` this process sees (``gpu:0`` under ``--gpus-per-task=1``, where
    each rank sees its own). Counted without creating a CUDA context on any GPU: only the chosen
    one gets this rank's context. Ranks that end up sharing a GPU (more ranks than GPUs on a node)
    are summed through MPI in host memory, since NCCL refuses two ranks on one GPU."""
    n = len(_core.cuda_devices(with_free_memory=False)) if gpu_count is None else gpu_count
    if n == 0:
        return "cpu"
    return f"gpu:{local_rank(world, environ) % n}"


class MultiWorkerMirroredStrategy(Strategy):
    """One replica per process, the processes started by ``srun`` or ``mpirun`` (TensorFlow's
    ``MultiWorkerMirroredStrategy``; ranks come from MPI, not from ``TF_CONFIG``).

    hpcnn initialises MPI itself, or uses it as ``mpi4py`` initialised it. Each rank takes local
    GPU ``local_rank % n`` of the ``n`` GPUs it sees (its own under ``--gpus-per-task=1``; the
    local rank is the launcher's, ``SLURM_LOCALID`` or ``OMPI_COMM_WORLD_LOCAL_RANK``), or the CPU
    where no GPU is visible; ``device='cpu'`` asks for CPU ranks explicitly. Choosing creates no
    CUDA context on the other GPUs. GPU ranks sum with
    NCCL (its id broadcast over MPI), CPU ranks with ``MPI_Allreduce`` in place. Every rank runs
    the same script; the global batch is split among all ranks."""

    def __init__(self, cluster_resolver: Any = None, communication_options: Optional[CommunicationOptions] = None,
                 device: Optional[str] = None) -> None:
        global _mpi_shutdown_registered
        if cluster_resolver is not None:
            raise ValueError("MultiWorkerMirroredStrategy: cluster_resolver is not supported: hpcnn takes the ranks "
                             "from MPI (start the processes with srun or mpirun)")
        options = _options(communication_options, "MultiWorkerMirroredStrategy")
        reason = _dist.mpi_unavailable_reason()
        if reason:
            raise RuntimeError(f"MultiWorkerMirroredStrategy needs MPI: {reason}")
        world = dict(_dist.mpi_init())
        if not _mpi_shutdown_registered:
            atexit.register(_dist.mpi_shutdown)
            _mpi_shutdown_registered = True
        name = normalize_device(device) if device is not None else default_rank_device(world)
        timeout = options.timeout_seconds or _dist.default_timeout_seconds()
        heartbeat = (options.heartbeat_seconds if options.heartbeat_seconds is not None
                     else _dist.default_heartbeat_seconds())
        group = _dist.Group.across_processes(name, options.implementation, timeout, heartbeat)
        super().__init__(group, options, world)


class _DefaultStrategy:
    """What ``get_strategy()`` returns outside any ``scope()``: one replica, this process."""

    num_replicas_in_sync = 1
    worker_index = 0
    num_workers = 1
    is_chief = True

    @contextlib.contextmanager
    def scope(self) -> Iterator["_DefaultStrategy"]:
        yield self

    def __repr__(self) -> str:
        return "DefaultStrategy()"


_DEFAULT = _DefaultStrategy()


def get_strategy() -> Any:
    """The strategy of the innermost ``strategy.scope()``, or a default one-replica strategy."""
    s = _scope.get()
    return s if s is not None else _DEFAULT


def has_strategy() -> bool:
    """Whether a ``strategy.scope()`` block is active."""
    return _scope.get() is not None


def current_strategy() -> Optional[Strategy]:
    """The strategy of the innermost ``scope()`` block, or None."""
    return _scope.get()


def writes_files(model: Any) -> bool:
    """Whether this process writes `model`'s files: False on the ranks other than the chief of a
    multi-process strategy (saves, checkpoints, backups and CSV logs are the chief's)."""
    s = getattr(model, "distribute_strategy", None)
    return s is None or not s.multi_process or s.is_chief


__all__ = ["MirroredStrategy", "MultiWorkerMirroredStrategy", "CommunicationOptions", "Strategy", "RanksDisagree",
           "get_strategy", "has_strategy"]
