"""Shared pytest fixtures."""
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
