"""Devices: listing them, and choosing where a model runs.

A model lives on one device, shown by ``model.summary()`` and ``model.device``. It is the CPU
unless you ask for a GPU, with ``model.compile(..., device='gpu')`` or inside
``with hpcnn.device('gpu'):``. Asking for a GPU where none is usable raises RuntimeError saying
why (no CUDA backend compiled, no driver, no device visible, CUDA_VISIBLE_DEVICES empty or
NoDevFiles): hpcnn never falls back to the CPU silently.
"""
from __future__ import annotations

import contextlib
import contextvars
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Union

from . import _core

_scope: contextvars.ContextVar[Optional[str]] = contextvars.ContextVar("hpcnn_device", default=None)


@dataclass(frozen=True)
class PhysicalDevice:
    """A device as ``tf.config.list_physical_devices`` shows it, with hpcnn's details."""

    name: str
    device_type: str
    details: Dict[str, Any] = field(default_factory=dict, compare=False)

    def __repr__(self) -> str:
        return f"PhysicalDevice(name={self.name!r}, device_type={self.device_type!r})"


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "CPU"


def list_physical_devices(device_type: Optional[str] = None) -> List[PhysicalDevice]:
    """``list_physical_devices('CPU')`` / ``('GPU')`` / ``()`` for all. GPUs are those CUDA can use
    from this process (``CUDA_VISIBLE_DEVICES`` is honoured); see ``gpu_unavailable_reason()``.

    Listing creates no CUDA context on any GPU (on a node whose GPUs are in exclusive-process
    mode, a context on a GPU another rank uses would make that rank fail). So a GPU's
    ``details['memory_free']`` is given only for GPUs this process already uses, and is None for
    the others; ``gpu_memory_free('gpu:N')`` asks one GPU (creating this process's context there)."""
    kind = device_type.upper() if device_type else None
    if kind not in (None, "CPU", "GPU"):
        raise ValueError(f"device_type must be 'CPU' or 'GPU', got {device_type!r}")
    out: List[PhysicalDevice] = []
    if kind in (None, "CPU"):
        out.append(PhysicalDevice("/physical_device:CPU:0", "CPU", {
            "model": _cpu_name(), "threads": _core.get_num_threads(),
            "cpus_in_affinity_mask": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
            "blas": _core.build_info()["blas_vendor"]}))
    if kind in (None, "GPU"):
        for d in _core.cuda_devices(with_free_memory=False):
            in_use = _core.cuda_primary_context_active(d.index)
            out.append(PhysicalDevice(f"/physical_device:GPU:{d.index}", "GPU", {
                "device_name": d.name, "compute_capability": tuple(d.compute_capability),
                "memory_total": d.total_memory, "memory_free": _core.cuda_free_memory(d.index) if in_use else None,
                "multiprocessors": d.multiprocessors, "memory_bus_width_bits": d.memory_bus_width_bits,
                "memory_bandwidth_gbs": d.memory_bandwidth_gbs, "pci_bus_id": d.pci_bus_id}))
    return out


def gpu_memory_free(spec: Union[str, PhysicalDevice] = "gpu") -> int:
    """Free bytes on one GPU (``'gpu'`` is ``'gpu:0'``), as the driver reports them now. Asking
    creates this process's CUDA context on that GPU if it has none (a few hundred MiB of it).
    RuntimeError when no GPU is usable, ValueError for a name that is not a GPU."""
    name = normalize(spec)
    if name == "cpu":
        raise ValueError(f"gpu_memory_free: {spec!r} is not a GPU")
    return _core.cuda_free_memory(int(name.split(":")[1]))


def gpu_unavailable_reason() -> str:
    """Why no GPU is usable here ('' when one is)."""
    return _core.cuda_unavailable_reason()


def normalize(spec: Union[str, PhysicalDevice]) -> str:
    """'cpu', 'gpu', 'GPU:1', '/device:GPU:0', 'cuda:0' (or a ``PhysicalDevice``) -> 'cpu' | 'gpu:N'.

    The grammar is the C++ core's (``csrc/core/device.cpp``), so Python and C++ accept the same
    names. Raises ValueError for a name that is not a device, and RuntimeError (with the reason)
    when a GPU is asked for and cannot be used."""
    if isinstance(spec, PhysicalDevice):
        spec = spec.name
    return _core.normalize_device(spec)


@contextlib.contextmanager
def device(spec: Union[str, PhysicalDevice]) -> Iterator[str]:
    """``with hpcnn.device('gpu'):`` models compiled, trained, evaluated or used for prediction in
    this block run there (a model compiled elsewhere moves, keeping weights and optimizer state)."""
    name = normalize(spec)
    token = _scope.set(name)
    try:
        yield name
    finally:
        _scope.reset(token)


def current_scope() -> Optional[str]:
    """The device of the innermost ``with hpcnn.device(...)`` block, or None."""
    return _scope.get()


__all__ = ["PhysicalDevice", "list_physical_devices", "gpu_memory_free", "gpu_unavailable_reason", "device"]
