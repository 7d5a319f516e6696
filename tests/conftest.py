"""Shared pytest fixtures, and one line per reason for the machine's skips: for every folder of tests/
(the layout: tests/README.md, held by tests/rules/test_layout.py)."""
import pytest

from hpcnn import _core


@pytest.fixture
def tf32_off():
    """Tight GPU-vs-CPU comparisons need IEEE float32 math on the GPU; restores the switch after."""
    before = _core.cuda_get_tf32()
    _core.cuda_set_tf32(False)
    yield
    _core.cuda_set_tf32(before)


@pytest.fixture
def threads():
    """Restores the thread count a test changes."""
    before = _core.get_num_threads()
    yield
    _core.set_num_threads(before)


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
