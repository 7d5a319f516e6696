"""`hpcnn notebook run|list|copy` (python/hpcnn/notebook_run.py, notebook_files.py): notebooks found
by a short name, parameters injected after the cell tagged `parameters`, executed headless in a
kernel of this interpreter, the executed notebook written beside the files it wrote, also when a
cell fails, and clear messages for what a student gets wrong. Most run a tiny notebook written
here; one runs notebook 01 quick through the command, as an sbatch script does."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import hpcnn
from hpcnn import cli, notebook_files, notebook_run
from hpcnn.notebook_files import NotebookError
from tests.support import paths

ROOT = paths.ROOT
NB01 = "01_cifar10_cpu_vs_gpu.ipynb"


def jupyter_or_skip():
    """nbformat for the tests that execute notebooks (CI installs the extra: a missing one fails there)."""
    if os.environ.get("HPCNN_EXPECT_JUPYTER") == "1":
        import nbformat
        return nbformat
    pytest.importorskip("nbclient", reason='running notebooks needs `pip install --no-build-isolation ".[jupyter]"`')
    pytest.importorskip("ipykernel", reason='running notebooks needs `pip install --no-build-isolation ".[jupyter]"`')
    return pytest.importorskip("nbformat", reason='running notebooks needs `pip install --no-build-isolation ".[jupyter]"`')


def tiny_notebook(tmp_path, *code, params="N = 1\nNAME = 'a'", name="tiny.ipynb"):
    """A notebook with a title, a cell tagged `parameters` and the given code cells."""
    nbformat = jupyter_or_skip()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# A tiny notebook\n\nfor the tests")]
    if params is not None:
        nb.cells.append(nbformat.v4.new_code_cell(params, metadata={"tags": ["parameters"]}))
    nb.cells += [nbformat.v4.new_code_cell(c) for c in code]
    path = tmp_path / name
    nbformat.write(nb, str(path))
    return path


def command(capsys, *args):
    """`hpcnn notebook ARGS` in this process: (exit status, stdout, stderr)."""
    rc = cli.main(["notebook", *map(str, args)])
    out, err = capsys.readouterr()
    return rc, out, err


def read(path):
    return json.loads(Path(path).read_text())


def source(cell):
    return "".join(cell["source"])


# ---------------------------------------------------------------------------------- names

@pytest.mark.parametrize("name", ["01", "1", "cifar10", "01_cifar", NB01])
def test_a_shipped_notebook_by_number_or_name(name):
    assert notebook_files.resolve(name).name == NB01


def test_other_shipped_notebooks_and_a_path(tmp_path):
    assert notebook_files.resolve("mnist").name == "02_mnist_benchmark.ipynb"
    assert notebook_files.resolve("3").name == "03_resnet_cifar10.ipynb"
    assert notebook_files.resolve("resnet").name == "03_resnet_cifar10.ipynb"
    mine = tmp_path / "mine.ipynb"
    mine.write_text("{}")
    assert notebook_files.resolve(str(mine)) == mine


def test_in_a_source_checkout_the_notebooks_are_the_repositorys():
    # This hpcnn runs from python/hpcnn (PYTHONPATH or an editable install): no installed copy.
    if (notebook_files.PACKAGE_DIR / "notebooks").is_dir():
        pytest.skip("needs hpcnn imported from the source tree (PYTHONPATH or an editable install); this one "
                    "was installed with its own copy of the notebooks (test_an_installed_hpcnn_prefers_its_own_"
                    "notebooks covers that)")
    assert notebook_files.notebooks_dir() == ROOT / "notebooks"
    assert [p.name for p in notebook_files.shipped()] == sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("name", ["7", "nothing", "missing/nb.ipynb", "missing.ipynb"])
def test_an_unknown_notebook_lists_the_shipped_ones(name, capsys):
    with pytest.raises(NotebookError, match="not found|no notebook") as e:
        notebook_files.resolve(name)
    assert NB01 in str(e.value) and "02_mnist_benchmark.ipynb" in str(e.value)
    rc, out, err = command(capsys, "run", name)
    assert rc == 2 and NB01 in err and out == ""


def test_notebook_list_shows_number_title_and_parameters(capsys):
    rc, out, _ = command(capsys, "list")
    assert rc == 0
    assert re.search(r"^\s+01\s+01_cifar10_cpu_vs_gpu\.ipynb\s+Deep learning CPU vs GPU", out, re.M), out
    assert re.search(r"parameters: EPOCHS=\d+, SYNTHETIC=False, TRAIN_ROWS=None", out), out


def test_notebook_copy_puts_a_fresh_copy_and_keeps_changes(tmp_path, capsys):
    rc, out, _ = command(capsys, "copy", "01", tmp_path / "work")
    copy = tmp_path / "work" / NB01
    assert rc == 0 and copy.read_bytes() == (notebook_files.notebooks_dir() / NB01).read_bytes()
    copy.write_text("my changes")
    rc, _, err = command(capsys, "copy", "01", tmp_path / "work")
    assert rc == 2 and "--force" in err and copy.read_text() == "my changes"
    assert command(capsys, "copy", "01", tmp_path / "work", "--force")[0] == 0
    assert copy.read_text() != "my changes"


def test_cmake_installs_exactly_the_repositorys_notebooks():
    """An installed hpcnn finds its notebooks in hpcnn/notebooks/: CMakeLists.txt's install() rule
    lists each file (a notebook added to notebooks/ must be added there)."""
    text = (ROOT / "CMakeLists.txt").read_text()
    m = re.search(r"install\(FILES((?:\s+notebooks/\S+\.ipynb)+)\s+DESTINATION hpcnn/notebooks\)", text)
    assert m, "CMakeLists.txt: no install(FILES notebooks/... DESTINATION hpcnn/notebooks)"
    assert sorted(Path(f).name for f in m.group(1).split()) == sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))


def test_the_jupyter_extra_runs_notebooks_both_ways():
    """nbclient for `hpcnn notebook run`, nbconvert for `jupyter nbconvert --to notebook --execute`."""
    line = next(l for l in (ROOT / "pyproject.toml").read_text().splitlines() if l.startswith("jupyter = "))
    for package in ("ipykernel", "nbclient", "nbformat", "nbconvert", "matplotlib"):
        assert f'"{package}' in line, package


# ---------------------------------------------------------------------------------- parameters

def test_parameters_are_python_literals_or_raw_strings():
    assert notebook_run.parse_parameters(["TRAIN_ROWS=5000", "LR = 0.01", "DATA=None", "S='x y'", "L=[1, 2]"],
                                         ["PATH=/scratch/c.h5"], epochs=2, synthetic=True) == {
        "EPOCHS": 2, "SYNTHETIC": True, "TRAIN_ROWS": 5000, "LR": 0.01, "DATA": None, "S": "x y", "L": [1, 2],
        "PATH": "/scratch/c.h5"}
    assert notebook_run.parameters_source({"A": 1, "B": "x"}).splitlines()[1:] == ["A = 1", "B = 'x'"]


@pytest.mark.parametrize("args, message", [
    (["-p", "EPOCHS"], "expected NAME=VALUE"),
    (["-p", "2X=1"], "not a Python variable name"),
    (["-p", "class=1"], "not a Python variable name"),
    (["-p", "SYNTHETIC=true"], "Python writes True"),
    (["-p", "DATA=cifar"], "not a Python literal.*-r DATA=cifar"),
    (["-p", "X=__import__('os')"], "not a Python literal"),
    (["--epochs", "2", "-p", "EPOCHS=3"], "EPOCHS is given twice"),
    (["-p", "EPOCH=2"], "has no parameter EPOCH; its parameters: EPOCHS="),
    (["--synthetic", "02"], "02_mnist_benchmark.ipynb has no parameter SYNTHETIC"),
])
def test_bad_parameters_are_refused_before_anything_runs(args, message, capsys, tmp_path):
    if "02" not in args:
        args = ["01", *args]
    if "EPOCH=2" in args or "--synthetic" in args:
        jupyter_or_skip()   # checked against the notebook's parameters cell, read with nbformat
    rc, out, err = command(capsys, "run", *args, "--out", tmp_path / "out")
    assert rc == 2 and re.search(message, err), err
    assert not (tmp_path / "out").exists()


def test_parameters_need_one_parameters_cell(tmp_path, capsys):
    path = tiny_notebook(tmp_path, "print(1)", params=None)
    rc, _, err = command(capsys, "run", path, "-p", "N=2", "--out", tmp_path / "out")
    assert rc == 2 and "tiny.ipynb has 0 code cells tagged 'parameters'" in err, err


# ---------------------------------------------------------------------------------- running

def test_a_run_injects_the_parameters_and_writes_beside_its_files(tmp_path, capsys, monkeypatch):
    # MPLBACKEND=Agg, as a job script may set it: the figure still lands in the notebook (inline backend).
    monkeypatch.setenv("MPLBACKEND", "Agg")
    path = tiny_notebook(
        tmp_path,
        "import os\nprint(os.getcwd())\nopen('result.txt', 'w').write(f'{N} {NAME} {type(N).__name__}')",
        "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()")
    out = tmp_path / "results" / "run1"
    rc, stdout, err = command(capsys, "run", path, "-p", "N=5000", "-r", "NAME=hello world", "--out", out)
    assert rc == 0, err
    executed = out / "tiny.ipynb"
    nb = read(executed)
    tags = [c["metadata"].get("tags", []) for c in nb["cells"]]
    assert tags[1] == ["parameters"] and tags[2] == ["injected-parameters"]
    assert source(nb["cells"][2]).splitlines()[1:] == ["N = 5000", "NAME = 'hello world'"]
    assert (out / "result.txt").read_text() == "5000 hello world int"          # took effect, in the output folder
    assert str(out.resolve()) in "".join(nb["cells"][3]["outputs"][0]["text"])  # the kernel's working directory
    assert any("image/png" in o.get("data", {}) for o in nb["cells"][4]["outputs"])
    assert all(c["execution_count"] for c in nb["cells"] if c["cell_type"] == "code")
    assert sorted(p.name for p in out.iterdir()) == ["result.txt", "tiny.ipynb"]   # no temporary file left
    # the job log: each cell's start (number/total, first line) and time, then the total and the path
    for k, first in enumerate(["N = 1", "# Parameters from `hpcnn notebook run`", "import os",
                               "import matplotlib.pyplot as plt"], 1):
        assert f"[{k}/4] {first}" in stdout and re.search(rf"\[{k}/4\] done in \d+\.\d s", stdout), stdout
    assert f"done in " in stdout.splitlines()[-2] and str(executed) in stdout.splitlines()[-2]
    assert "beside it: result.txt" in stdout
    assert "WARNING" not in err, err                                            # a quiet kernel


def test_the_default_output_folder_is_named_after_the_notebook(tmp_path, capsys, monkeypatch):
    path = tiny_notebook(tmp_path, "open('f.txt', 'w').write('x')")
    monkeypatch.chdir(tmp_path)
    rc, _, err = command(capsys, "run", path)
    assert rc == 0, err
    assert (tmp_path / "notebook-results" / "tiny" / "tiny.ipynb").exists()
    assert (tmp_path / "notebook-results" / "tiny" / "f.txt").exists()


def test_a_failing_cell_still_writes_the_notebook_and_names_the_cell(tmp_path, capsys):
    path = tiny_notebook(tmp_path, "x = 1", "y = x / 0  # the bad one", "print('never')")
    rc, stdout, err = command(capsys, "run", path, "--out", tmp_path / "out")
    assert rc == 1
    assert "cell [3/4] (y = x / 0  # the bad one) failed: ZeroDivisionError: division by zero" in err, err
    assert str(tmp_path / "out" / "tiny.ipynb") in err
    nb = read(tmp_path / "out" / "tiny.ipynb")
    bad, never = nb["cells"][3], nb["cells"][4]
    assert [o["ename"] for o in bad["outputs"] if o["output_type"] == "error"] == ["ZeroDivisionError"]
    assert never["execution_count"] is None and not never["outputs"]
    assert "[3/4] error in" in stdout


def test_a_cell_past_the_timeout_is_stopped_and_marked(tmp_path, capsys):
    path = tiny_notebook(tmp_path, "import time\ntime.sleep(60)", "print('never')")
    rc, _, err = command(capsys, "run", path, "--timeout", "3", "--out", tmp_path / "out")
    assert rc == 1 and "cell [2/3] (import time) ran longer than --timeout 3 s" in err, err
    cell = read(tmp_path / "out" / "tiny.ipynb")["cells"][2]
    assert "CellTimeoutError" in [o.get("ename") for o in cell["outputs"]]   # after nbclient's KeyboardInterrupt


@pytest.mark.parametrize("missing", ["nbclient", "ipykernel"])
def test_without_the_jupyter_extra_the_message_names_it(missing, tmp_path, capsys, monkeypatch):
    path = tiny_notebook(tmp_path, "print(1)")
    if missing == "ipykernel":
        find_spec = notebook_run.importlib.util.find_spec
        monkeypatch.setattr(notebook_run.importlib.util, "find_spec",
                            lambda name, *a: None if name == "ipykernel" else find_spec(name, *a))
    else:
        monkeypatch.setitem(sys.modules, missing, None)   # `import nbclient` raises ImportError
    rc, _, err = command(capsys, "run", path, "--out", tmp_path / "out")
    assert rc == 2 and f"({missing} is not installed for {sys.executable})" in err, err
    assert 'pip install --no-build-isolation ".[jupyter]"' in err


def test_notebook_01_quick_through_the_command(tmp_path):
    """The sbatch path: `python -m hpcnn notebook run 01 --epochs 1 --synthetic -p TRAIN_ROWS=1000`
    in a process of its own, this hpcnn first on its path."""
    jupyter_or_skip()
    out = tmp_path / "results"
    env = dict(os.environ, PYTHONPATH=str(Path(hpcnn.__file__).resolve().parents[1]),
               HPCNN_DATA_DIR=str(tmp_path / "data"))
    r = subprocess.run([sys.executable, "-m", "hpcnn", "notebook", "run", "01", "--epochs", "1", "--synthetic",
                        "-p", "TRAIN_ROWS=1000", "--out", str(out)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    nb = read(out / NB01)
    injected = [c for c in nb["cells"] if "injected-parameters" in c["metadata"].get("tags", [])]
    assert source(injected[0]).splitlines()[1:] == ["EPOCHS = 1", "SYNTHETIC = True", "TRAIN_ROWS = 1000"]
    errors = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c["outputs"] if o["output_type"] == "error"]
    assert not errors
    assert (out / "cifar10_model.h5").exists()
    assert (tmp_path / "data" / "synthetic_cifar10_seed0_train1000.hdf5").exists()
    assert re.search(r"^done in .*" + re.escape(NB01), r.stdout, re.M), r.stdout


def test_an_installed_hpcnn_prefers_its_own_notebooks(tmp_path, monkeypatch):
    """hpcnn/notebooks/ (what CMakeLists.txt installs) wins over any checkout."""
    (tmp_path / "hpcnn" / "notebooks").mkdir(parents=True)
    (tmp_path / "hpcnn" / "notebooks" / "01_x.ipynb").write_text("{}")
    monkeypatch.setattr(notebook_files, "PACKAGE_DIR", tmp_path / "hpcnn")
    assert notebook_files.notebooks_dir() == tmp_path / "hpcnn" / "notebooks"
    assert notebook_files.resolve("1") == tmp_path / "hpcnn" / "notebooks" / "01_x.ipynb"
    (tmp_path / "hpcnn" / "notebooks" / "01_x.ipynb").unlink()
    (tmp_path / "hpcnn" / "notebooks").rmdir()
    with pytest.raises(NotebookError, match="no notebooks found"):
        notebook_files.notebooks_dir()


def test_a_kernel_that_dies_is_named_as_such(tmp_path, capsys):
    """Out of memory (the job's --mem) kills the kernel, not the command: it says so and keeps the notebook."""
    path = tiny_notebook(tmp_path, "x = 1", "import os\nos._exit(1)", "print('never')")
    rc, _, err = command(capsys, "run", path, "--out", tmp_path / "out")
    assert rc == 1 and "cell [3/4] (import os) stopped: the kernel died (out of memory?" in err, err
    cell = read(tmp_path / "out" / "tiny.ipynb")["cells"][3]
    assert [o.get("ename") for o in cell["outputs"]] == ["DeadKernelError"]
