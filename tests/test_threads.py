"""hpcnn's thread pool: resizing, regions right after a resize, determinism across sizes."""
import threading

import numpy as np

import hpcnn
from hpcnn import _core


def _conv_backward_once():
    rng = np.random.default_rng(0)
    x = rng.random((8, 9, 9, 5), dtype=np.float32)
    w = rng.random((3, 3, 5, 7), dtype=np.float32)
    dy = rng.random((8, 9, 9, 7), dtype=np.float32)
    return _core.ops.conv2d_backward(x, w, None, dy, strides=1, padding="same", relu=False)


def test_regions_right_after_resizing_never_hang():
    """A region started right after set_num_threads used to be missed by a new worker (deadlock).
    Run it in a thread with a timeout so a regression fails instead of hanging the suite."""
    original = hpcnn.get_num_threads()
    done = threading.Event()

    def body():
        for n in (3, 1, 4, 2, 3, 2) * 5:
            hpcnn.set_num_threads(n)
            _conv_backward_once()
        done.set()

    t = threading.Thread(target=body, daemon=True)
    t.start()
    t.join(timeout=120)
    hpcnn.set_num_threads(original) if done.is_set() else None
    assert done.is_set(), "parallel region after set_num_threads did not finish (thread-pool deadlock)"


def test_same_thread_count_bitwise_identical():
    original = hpcnn.get_num_threads()
    try:
        for n in (1, 2, 3):
            hpcnn.set_num_threads(n)
            a, b = _conv_backward_once(), _conv_backward_once()
            for u, v in zip(a, b):
                np.testing.assert_array_equal(u, v)
    finally:
        hpcnn.set_num_threads(original)
