"""The test suite's layout, held as a test (tests/README.md points here).

Every test module lives in the folder of LAYOUT that names what it tests: a test of the C++ core's
ops in tests/core/ops/, of hpcnn.callbacks in tests/python/callbacks/, a whole job (the tutorial,
a notebook, a slurm script, the CLI or a bench script end to end) in tests/system/. A module that
tests two things goes where its failures would be read first. Nothing is collected from tests/
itself, from tests/support/ (the helpers) or from tests/data/ (committed fixtures).

Helpers are modules of ONE package, tests/support/, imported as ``tests.support.<name>`` by the
tests, their worker processes (``python -m tests.support.<name>``, started in the repository root)
and bench/ (``python -m bench.<name>``). So: no sys.path or PYTHONPATH edit in tests/ and bench/
(EXCEPTIONS lists the few whose edit is the subject of the test, each with its reason), and no
module imports a test module (what two test modules share belongs in tests/support/).

Every folder of tests/ that holds Python is a package (an __init__.py): the test modules then have
unique dotted names (tests.core.ops.test_ops, tests.gpu.test_gpu_ops), and pytest puts the
repository root on sys.path for them, where ``tests.support`` is found."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.support import paths

# folder (under tests/) -> what its test modules test
LAYOUT = {
    "core/core": "csrc/core: devices, the thread pool",
    "core/data": "csrc/data: the HDF5 loader and writer, shards, shuffle plans",
    "core/distribute": "csrc/distribute: data parallelism in one process and under mpirun",
    "core/nn": "csrc/nn: lowering, the step and memory plans, fusions, steps against references",
    "core/ops": "csrc/ops: every operator against float64 references, gradient checks",
    "gpu": "the CUDA backend: GPU against CPU (marked gpu) and its host-side switches",
    "hostile": "hostile and damaged files: the corpora and the targeted refusals",
    "python": "hpcnn's top-level modules (arguments, messages, losses and metrics, plots, progress, ...)",
    "python/applications": "hpcnn.applications: the ImageNet backbones against live Keras, their weight files, "
                           "preprocessing, fine-tuning",
    "python/callbacks": "hpcnn.callbacks",
    "python/datasets": "hpcnn.datasets",
    "python/export": "hpcnn.export: ONNX and OpenVINO files against predict, in ONNX Runtime and OpenVINO",
    "python/formats": "hpcnn.formats: Keras' and hpcnn's files, saving",
    "python/image_folders": "hpcnn.image_folders: folders of images (listing, resize, decoded cache, datasets)",
    "python/keras": "hpcnn.keras: Keras' namespace, its tutorial code, live Keras",
    "python/layers": "hpcnn.layers",
    "python/models": "hpcnn.models: Sequential, the functional API, nesting, model calls",
    "python/optimizers": "hpcnn.optimizers: updates, schedules, regularizers",
    "rules": "the house rules: floors, includes, public interfaces, warnings, docs, this layout",
    "system": "whole jobs: the tutorial, notebooks, slurm scripts, the CLI and bench scripts, installs",
    "system/slurm": "the slurm/ scripts and the Open OnDemand app as jobs of a real one-node Slurm",
}
HELPERS = "support"  # the one helper package
NOT_PYTHON_PACKAGES = ("data", "cpp")  # fixtures and C++ sources: no test modules, no __init__.py

# Lines that edit sys.path or PYTHONPATH, allowed because that edit is what is being tested.
# (file, the line's text) -> why. An entry that no longer matches a line fails too.
EXCEPTIONS = {
    ("tests/support/hostile_models.py", "sys.path.insert(0, payload)"):
        "the attack's premise: a hostile module importable, which loading a file must never import",
    ("tests/hostile/test_hostile_keras_files.py", "monkeypatch.syspath_prepend(str(folder))"):
        "the attack's premise: a hostile module importable, which loading a file must never import",
    ("tests/system/test_nvidia_wheels.py", "env = dict(os.environ, PYTHONPATH=str(site))"):
        "CMake finding NVIDIA's wheels through PYTHONPATH is what the test checks",
    ("tests/system/test_notebook_run.py", "env = dict(os.environ, PYTHONPATH=str(Path(hpcnn.__file__).resolve().parents[1]),"):
        "a batch job's environment: this hpcnn first on the path of `python -m hpcnn notebook run`",
    ("bench/bench_loader_ab.py", "env = dict(os.environ, PYTHONPATH=pythonpath)"):
        "the A/B benchmark picks the build under comparison by PYTHONPATH",
}
PATH_EDIT = re.compile("|".join([
    r"sys\.path\.(insert|append|extend)\(", r"sys\.path\s*(\+=|=[^=])", r"sys\.path\[[^\]]*\]\s*=[^=]",
    r"syspath_prepend\(", r"PYTHONPATH\s*=[^=]", r"""["']PYTHONPATH["']\s*[\]:]""",
]))
TEST_IMPORT = re.compile(r"^\s*(from\s+(\S+\.)?test_\w+\s+import|import\s+(\S+\.)?test_\w+)", re.M)


def misplaced(tests: Path) -> list[str]:
    """The test modules under `tests` outside LAYOUT's folders, and the folders holding Python that
    are not packages: one line each."""
    problems = []
    for path in sorted(tests.rglob("test_*.py")):
        folder = path.parent.relative_to(tests).as_posix()
        if folder not in LAYOUT:
            where = "tests/ itself" if folder == "." else f"tests/{folder}/"
            problems.append(f"tests/{path.relative_to(tests).as_posix()}: a test module in {where}, outside "
                            f"the layout (tests/rules/test_layout.py, LAYOUT: {', '.join(sorted(LAYOUT))})")
    holding = {p.parent for p in tests.rglob("*.py")}
    for folder in sorted(holding | {a for f in holding for a in f.parents if tests in a.parents} | {tests}):
        rel = folder.relative_to(tests).as_posix()
        if rel.split("/")[0] in NOT_PYTHON_PACKAGES or "__pycache__" in rel:
            continue
        if not (folder / "__init__.py").is_file():
            problems.append(f"tests/{rel}/: holds Python but is no package (no __init__.py)")
    return problems


def python_files():
    for top in ("tests", "bench"):
        for path in sorted((paths.ROOT / top).rglob("*.py")):
            if "__pycache__" not in path.parts and path != Path(__file__).resolve():
                yield path.relative_to(paths.ROOT).as_posix(), path.read_text()


def test_every_test_module_is_in_a_folder_of_the_layout():
    assert misplaced(paths.TESTS) == []
    assert all((paths.TESTS / folder).is_dir() for folder in LAYOUT), "a LAYOUT folder is gone: update LAYOUT"
    assert not list((paths.TESTS / HELPERS).glob("test_*.py"))


def test_the_layout_check_fails_a_test_module_placed_outside_it(tmp_path):
    """The check above on a made-up tree: a test at tests/'s top level, one in an unknown folder and
    a folder that is no package are each named."""
    for folder in ("", "core/ops", "misc", "python/nowhere"):
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "test_top.py").write_text("")
    (tmp_path / "core" / "__init__.py").write_text("")
    (tmp_path / "core" / "ops" / "test_fine.py").write_text("")
    (tmp_path / "misc" / "test_misc.py").write_text("")
    (tmp_path / "python" / "nowhere" / "test_x.py").write_text("")
    problems = misplaced(tmp_path)
    assert len(problems) == 4, problems
    assert problems[0].startswith("tests/misc/test_misc.py: a test module in tests/misc/, outside the layout")
    assert problems[1].startswith("tests/python/nowhere/test_x.py: a test module in tests/python/nowhere/")
    assert problems[2].startswith("tests/test_top.py: a test module in tests/ itself, outside the layout")
    assert problems[3] == "tests/python/: holds Python but is no package (no __init__.py)"


def path_edits(name: str, text: str) -> list[str]:
    """The lines of a file that edit sys.path or PYTHONPATH and are not in EXCEPTIONS."""
    return [f"{name}:{i}: {line.strip()}" for i, line in enumerate(text.splitlines(), 1)
            if PATH_EDIT.search(line) and (name, line.strip()) not in EXCEPTIONS]


def test_no_sys_path_or_pythonpath_edits_in_tests_and_bench():
    found, used = [], set()
    for name, text in python_files():
        found += path_edits(name, text)
        used |= {key for key in EXCEPTIONS if key[0] == name and key[1] in {ln.strip() for ln in text.splitlines()}}
    assert found == [], "import tests.support.<name> (run workers as python -m from the root) instead:\n" + "\n".join(found)
    assert used == set(EXCEPTIONS), f"EXCEPTIONS that match no line any more: {set(EXCEPTIONS) - used}"


def test_no_module_imports_a_test_module():
    """No module of tests/ or bench/ imports a test module, in its own code or in the code it hands
    to a child process (read from the text, strings included): what two test modules share lives
    in tests/support/."""
    found = []
    for name, text in python_files():
        found += [f"{name}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0).strip()}"
                  for m in TEST_IMPORT.finditer(text)]
        found += [f"{name}:{node.lineno}: a relative import (import tests.support.<name> instead)"
                  for node in ast.walk(ast.parse(text)) if isinstance(node, ast.ImportFrom) and node.level]
    assert found == [], "\n".join(found)


def test_the_test_import_check_sees_each_form():
    text = "\n".join(["from test_checkpoints import data", "import tests.core.ops.test_ops as t",
                      "CODE = 'a child process'", "    from tests.python.x.test_y import z", ""])
    assert [m.group(0).strip() for m in TEST_IMPORT.finditer(text)] == [
        "from test_checkpoints import", "import tests.core.ops.test_ops", "from tests.python.x.test_y import"]
    assert not TEST_IMPORT.search("from tests.support.small_models import small_model\nimport pytest\n")


@pytest.mark.parametrize("line", ["sys.path.insert(0, here)", "sys.path.append(d)", "sys.path[:0] = [d]",
                                  "sys.path += [d]", "env['PYTHONPATH'] = d", 'dict(os.environ, PYTHONPATH=d)',
                                  '{**os.environ, "PYTHONPATH": d}', "monkeypatch.syspath_prepend(d)"])
def test_the_path_edit_check_sees_each_form(line):
    assert path_edits("tests/x.py", f"import sys\n{line}\n") == [f"tests/x.py:2: {line}"]
    assert path_edits("tests/x.py", "if sys.path == before:\n    pass\n") == []
