"""`pytest -rs` prints each machine-level skip reason once, with its count (tests/conftest.py),
while other skips keep their own lines: run in a scratch folder with a copy of the conftest."""
import shutil
import subprocess
import sys

from tests.support import paths

TESTS = '''
import pytest

NO_GPU = pytest.mark.skipif(True, reason="no usable GPU: none here")


@NO_GPU
def test_a():
    pass


@NO_GPU
def test_b():
    pass


@pytest.mark.parametrize("n", [1, 2])
def test_c(n):
    pytest.skip("needs two usable GPUs (0 here)")


def test_d():
    pytest.skip("something of this test's own")


def test_e():
    pytest.skip("something of this test's own")
'''


def test_machine_skips_fold_into_one_line_per_reason(tmp_path):
    shutil.copy(paths.TESTS / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_skips.py").write_text(TESTS)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "test_skips.py"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    lines = [line for line in r.stdout.splitlines() if line.startswith("SKIPPED")]
    assert r.returncode == 0, r.stdout + r.stderr
    assert [line for line in lines if "no usable GPU" in line] == ["SKIPPED [2] conftest.py: no usable GPU: none here"]
    assert [line for line in lines if "two usable" in line] == ["SKIPPED [2] conftest.py: needs two usable GPUs (0 here)"]
    own = [line for line in lines if "own" in line]
    assert len(own) == 2 and all("test_skips.py:" in line for line in own), lines   # each at its test
