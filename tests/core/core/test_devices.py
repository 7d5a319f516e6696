"""Device names: one grammar (csrc/core/device.cpp) that Python's hpcnn.device(...), compile(device=...)
and the core's own entry points (ops, Model.to) all use, and the errors for names that are not devices
or GPUs that cannot be used. Runs everywhere: the GPU spellings are parsed without the usability check,
and the check itself is tested against whatever this machine has."""
import numpy as np
import pytest

import hpcnn
from hpcnn import _core, devices
from tests.support.small_models import small_model

CPU_SPELLINGS = ["cpu", "CPU", " cpu ", "cpu:0", "CPU:0", "cpu:", "/cpu:0", "//cpu",
                 "/device:CPU:0", "/DEVICE:cpu:0", "/physical_device:CPU:0"]
GPU_SPELLINGS = [("gpu", "gpu:0"), ("GPU", "gpu:0"), ("gpu:0", "gpu:0"), ("GPU:1", "gpu:1"), (" gpu:2\n", "gpu:2"),
                 ("gpu:", "gpu:0"), ("cuda", "gpu:0"), ("cuda:0", "gpu:0"), ("CUDA:3", "gpu:3"), ("/gpu:1", "gpu:1"),
                 ("/device:GPU:0", "gpu:0"), ("/device:gpu:2", "gpu:2"), ("/physical_device:GPU:1", "gpu:1"),
                 ("gpu:007", "gpu:7")]
BAD_NAMES = [("tpu", "unknown device 'tpu'"), ("", "unknown device ''"), ("gpu0", "unknown device 'gpu0'"),
             ("device:gpu:0", "unknown device"), ("gpu : 0", "unknown device"),
             ("gpu:x", "index after ':' must be a number"), ("gpu:-1", "index after ':' must be a number"),
             ("gpu:1:2", "index after ':' must be a number"), ("cpu:abc", "index after ':' must be a number"),
             ("gpu:99999999999", "out of range")]


def gpu_usable(index=0):
    return len(_core.cuda_devices(with_free_memory=False)) > index


@pytest.mark.parametrize("spec", CPU_SPELLINGS)
def test_cpu_spellings(spec):
    assert _core.normalize_device(spec) == "cpu"
    assert devices.normalize(spec) == "cpu"
    with hpcnn.device(spec) as name:
        assert name == "cpu"
        assert devices.current_scope() == "cpu"
    assert devices.current_scope() is None


@pytest.mark.parametrize("spec,expect", GPU_SPELLINGS)
def test_gpu_spellings_parse(spec, expect):
    assert _core.normalize_device(spec, check_usable=False) == expect


@pytest.mark.parametrize("spec,expect", GPU_SPELLINGS)
def test_gpu_spellings_are_checked_for_usability(spec, expect):
    index = int(expect.split(":")[1])
    if gpu_usable(index):
        assert devices.normalize(spec) == expect
        return
    reason = _core.cuda_unavailable_reason()
    with pytest.raises(RuntimeError) as e:
        devices.normalize(spec)
    if reason:  # no GPU at all: the message is the reason (no backend, no driver, no device visible)
        assert reason[:40] in str(e.value)
    else:  # some GPUs, not this index
        assert f"GPU {index} does not exist" in str(e.value)


@pytest.mark.parametrize("spec,message", BAD_NAMES)
def test_names_that_are_not_devices(spec, message):
    for check in (True, False):
        with pytest.raises(ValueError, match=message):
            _core.normalize_device(spec, check_usable=check)
    with pytest.raises(ValueError, match=message):
        with hpcnn.device(spec):
            pass
    assert devices.current_scope() is None


def test_unknown_device_message_lists_the_spellings():
    with pytest.raises(ValueError) as e:
        devices.normalize("tpu:0")
    for spelling in ("'cpu'", "'gpu'", "'gpu:N'", "'cuda:N'", "'/device:GPU:N'"):
        assert spelling in str(e.value)


@pytest.mark.parametrize("spec", [0, None, 1.5, b"cpu", ["cpu"]])
def test_device_must_be_a_string(spec):
    with pytest.raises(ValueError, match="device must be a string like 'cpu' or 'gpu:0', got"):
        devices.normalize(spec)
    with pytest.raises(ValueError, match="must be a string"):
        with hpcnn.device(spec):
            pass


def test_physical_devices_name_themselves():
    """A PhysicalDevice from list_physical_devices() (or its name) picks that device."""
    cpu = hpcnn.list_physical_devices("CPU")[0]
    assert devices.normalize(cpu) == "cpu" and devices.normalize(cpu.name) == "cpu"
    with hpcnn.device(cpu) as name:
        assert name == "cpu"
    for gpu in hpcnn.list_physical_devices("GPU"):
        assert devices.normalize(gpu) == "gpu:" + gpu.name.rsplit(":", 1)[1]


def test_model_compile_and_to_take_every_spelling():
    m = small_model()
    m.compile("adam", "sparse_categorical_crossentropy", device=" /device:CPU:0 ")
    assert m.device == "cpu"
    m.to("CPU:0")
    assert m.device == "cpu"
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        m.to("tpu")
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        m.compile("adam", "sparse_categorical_crossentropy", device="tpu")
    assert m.device == "cpu"


def test_core_entry_points_use_the_same_grammar():
    """The ops and the core model parse device names in C++ with the same function."""
    x = np.array([[-1.0, 2.0]], np.float32)
    for spec in (" CPU ", "/device:CPU:0", "/physical_device:CPU:0", "cpu:"):
        assert np.array_equal(_core.ops.relu_forward(x, device=spec), [[0.0, 2.0]])
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        _core.ops.relu_forward(x, device="tpu")
    with pytest.raises(ValueError, match="index after ':' must be a number"):
        _core.ops.relu_forward(x, device="gpu:x")


def test_gpu_index_past_the_visible_devices():
    n = len(_core.cuda_devices(with_free_memory=False))
    with pytest.raises(RuntimeError) as e:
        devices.normalize(f"gpu:{n + 3}")
    if n:
        assert f"GPU {n + 3} does not exist" in str(e.value) and f"{n} visible device(s)" in str(e.value)
    else:
        assert _core.cuda_unavailable_reason()[:40] in str(e.value)
