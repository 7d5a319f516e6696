"""The TF32 rule of tests/conftest.py, checked on the host (the TF32 switch is host state: no GPU
needed): every test marked gpu or multi_gpu, by its module, class, function or pytest.param (as
tests/support/gpu_target.py's KINDS mark their "gpu" case), runs with TF32 off; a test marked `tf32`
finds it on (the default); the switch is restored after each test, whatever the test did to it.

It runs pytest on a small suite in a fresh process, in a miniature copy of the tests package
(tests/conftest.py and tests/support/gpu_target.py copied into a temporary folder; HPCNN_TEST_GPU=cpu, so that the gpu cases run with the CPU standing in instead of being
skipped), and asserts inside each of its tests what the switch is."""
import os
import shutil
import subprocess
import sys
import textwrap

from hpcnn import _core
from tests.support import paths

SUITE = '''
import pytest

from hpcnn import _core
from tests.support.gpu_target import KINDS


def tf32():
    return _core.cuda_get_tf32()


def test_a_plain_test_finds_tf32_on_by_default():
    assert tf32() is True


@pytest.mark.parametrize("kind", KINDS)
def test_the_gpu_case_of_kinds_has_tf32_off(kind):
    assert tf32() is (kind == "cpu"), kind


@pytest.mark.parametrize("kind", [pytest.param("gpu", marks=pytest.mark.gpu), pytest.param("cpu")])
def test_a_gpu_param_of_its_own_has_tf32_off(kind):
    assert tf32() is (kind == "cpu"), kind


@pytest.mark.gpu
def test_a_gpu_test_that_turns_tf32_on_itself():
    assert tf32() is False
    _core.cuda_set_tf32(True)


def test_the_switch_is_restored_after_a_gpu_test():
    assert tf32() is True


@pytest.mark.multi_gpu
def test_a_multi_gpu_test_has_tf32_off():
    assert tf32() is False


class TestMarkedClass:
    pytestmark = pytest.mark.gpu

    def test_a_method_of_a_gpu_class_has_tf32_off(self):
        assert tf32() is False


@pytest.mark.gpu
@pytest.mark.tf32
def test_a_tf32_test_finds_it_on_and_may_turn_it_off():
    assert tf32() is True
    _core.cuda_set_tf32(False)


def test_the_switch_is_restored_after_a_tf32_test():
    assert tf32() is True


def test_a_plain_test_that_turns_it_off():
    _core.cuda_set_tf32(False)


def test_the_switch_is_restored_after_a_plain_test():
    assert tf32() is True
'''

MODULE_MARKED = '''
import pytest

from hpcnn import _core

pytestmark = pytest.mark.gpu


def test_a_test_of_a_gpu_module_has_tf32_off():
    assert _core.cuda_get_tf32() is False
'''

INI = '''[pytest]
markers =
    gpu: a GPU test
    multi_gpu: a two-GPU test
    slow: slow
'''


def test_the_tf32_rule_turns_tf32_off_for_every_gpu_test_and_restores_it(tmp_path):
    # tmp/tests is a package as the real one is: `python -m pytest` in tmp puts tmp first on
    # sys.path, so `tests.support.gpu_target` is the copy (no PYTHONPATH edit).
    tests = tmp_path / "tests"
    (tests / "support").mkdir(parents=True)
    (tests / "__init__.py").write_text("")
    (tests / "support" / "__init__.py").write_text("")
    shutil.copy(paths.TESTS / "conftest.py", tests / "conftest.py")
    shutil.copy(paths.TESTS / "support" / "gpu_target.py", tests / "support" / "gpu_target.py")
    (tmp_path / "pytest.ini").write_text(INI)
    (tests / "test_rule.py").write_text(textwrap.dedent(SUITE))
    (tests / "test_rule_module.py").write_text(textwrap.dedent(MODULE_MARKED))
    env = dict(os.environ, HPCNN_TEST_GPU="cpu")
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-v",
                        "--strict-markers", "-W", "error", "tests"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    # every test ran (none skipped: HPCNN_TEST_GPU=cpu), the `tf32` mark registered by conftest.py
    assert "14 passed" in out and "skipped" not in out, out
