"""Shared pytest fixtures, and one line per reason for the machine's skips: for every folder of tests/
(the layout: tests/README.md, held by tests/rules/test_layout.py)."""
import signal

import pytest

from hpcnn import _core


@pytest.fixture
def tf32_off():
    """Tight GPU-vs-CPU comparisons need IEEE float32 math on the GPU; restores the switch after.
    GPU tests (marked gpu or multi_gpu) have it already (the rule below); this is for a test that
    reaches a GPU without those marks."""
    before = _core.cuda_get_tf32()
    _core.cuda_set_tf32(False)
    yield
    _core.cuda_set_tf32(before)


# The TF32 rule: every test that runs on a GPU (marked gpu or multi_gpu, by the module, the class,
# the function or a pytest.param such as gpu_target.KINDS' "gpu") runs with TF32 off, since these
# tests compare the GPU with the CPU at float32 tolerances, and TF32 (on by default, as in
# TensorFlow) rounds a convolution's or a matrix product's inputs to 10 mantissa bits. An autouse
# fixture, so that a new module cannot forget it. A test that is about TF32 itself opts out with
# the `tf32` mark: it then finds the switch as the process has it (on, unless a test changed it
# and did not restore it) and may set it; the switch is restored after it either way.
GPU_MARKS = ("gpu", "multi_gpu")
TF32_MARK = "tf32"


def pytest_configure(config):
    config.addinivalue_line("markers", f"{TF32_MARK}: a GPU test about TF32 itself: the TF32 rule "
                                       "(tests/conftest.py) leaves the switch on for it")


def runs_on_gpu(item) -> bool:
    """Whether the TF32 rule turns TF32 off for this test item."""
    return any(item.get_closest_marker(m) for m in GPU_MARKS) and not item.get_closest_marker(TF32_MARK)


@pytest.fixture(autouse=True)
def tf32_rule(request):
    """The TF32 rule (above): TF32 off for a GPU test, the switch restored after every test."""
    before = _core.cuda_get_tf32()
    if runs_on_gpu(request.node):
        _core.cuda_set_tf32(False)
    yield
    _core.cuda_set_tf32(before)


@pytest.fixture
def threads():
    """Restores the thread count a test changes."""
    before = _core.get_num_threads()
    yield
    _core.set_num_threads(before)


@pytest.fixture
def default_sigint():
    """Python's own Ctrl-C handler (KeyboardInterrupt) for a test that sends SIGINT, put back as it
    was after. A background job (`nohup cmd &`, a batch script's `&`) starts Python with SIGINT
    ignored, and Python then leaves it ignored: a test that assumes Ctrl-C works sets it up. Child
    processes the test starts get SIGINT's default action too (a caught signal is reset on exec),
    so a Python child installs its KeyboardInterrupt handler again."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


# Skips that say what this machine lacks (no usable GPU, fewer than two) rather than anything about
# the test. pytest -rs prints one line per (file, line, reason), and a skip mark counts as the line
# of each test it marks, so without this the same reason would be printed once per GPU test
# function (82 times on a machine without a GPU). Reported at this file, they fold into one line
# per reason, with the count: "SKIPPED [287] tests/conftest.py: no usable GPU: ...".
MACHINE_SKIPS = ("no usable GPU", "needs two usable GPUs")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:
        reason = str(report.longrepr[2])
        if reason.removeprefix("Skipped: ").startswith(MACHINE_SKIPS):
            report.longrepr = (__file__, None, reason)
