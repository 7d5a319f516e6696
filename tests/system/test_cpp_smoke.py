"""The C++ smoke test (tests/cpp/smoke.cpp): a program that links the static core library
hpcnn_core, as C++ tests and tools can, and builds, trains and evaluates a tiny model with it.

It is built by the same CMake configure as the module when HPCNN_BUILD_CPP_TESTS is on; set
HPCNN_CPP_SMOKE to the built program to run it here (.ci/run does both)."""
import os
import subprocess

import pytest


def test_cpp_program_linking_the_core_library():
    exe = os.environ.get("HPCNN_CPP_SMOKE")
    if not exe:
        pytest.skip("C++ tests not built here: build with -C cmake.define.HPCNN_BUILD_CPP_TESTS=ON and set "
                    "HPCNN_CPP_SMOKE to <build-dir>/hpcnn_cpp_smoke (.ci/run does)")
    assert os.path.isfile(exe), f"HPCNN_CPP_SMOKE={exe!r} is not a file: was the build made with HPCNN_BUILD_CPP_TESTS=ON?"
    r = subprocess.run([exe], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "hpcnn C++ smoke test: all passed" in r.stdout
    assert "FAIL" not in r.stdout
