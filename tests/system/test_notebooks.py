"""The notebooks, executed headless (nbclient, the `jupyter` extra), in a quick setting: they run
without errors, keep one output per progress bar whatever the number of batches, write their
dataset to the data directory (not next to the notebook) and reuse it; on synthetic data every
figure says so, and without a GPU the reason is given once. Read without running: they ask for
the `hpcnn` kernel that the documented command registers, every cell has an id, and a kernel
without hpcnn gets told what to do. CI installs `.[jupyter]` and sets HPCNN_EXPECT_JUPYTER=1, so
these never skip there."""
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from tests.support import paths

ROOT = paths.ROOT
NOTEBOOKS = ROOT / "notebooks"

if os.environ.get("HPCNN_EXPECT_JUPYTER") == "1":
    import nbclient  # noqa: F401  (CI: a missing extra is an error, not a skip)
    import nbformat
else:
    nbclient = pytest.importorskip("nbclient", reason='the notebook tests need `pip install --no-build-isolation ".[jupyter]"`')
    nbformat = pytest.importorskip("nbformat", reason='the notebook tests need `pip install --no-build-isolation ".[jupyter]"`')
    pytest.importorskip("ipykernel", reason='the notebook tests need `pip install --no-build-isolation ".[jupyter]"`')


@pytest.fixture
def kernel(tmp_path, monkeypatch):
    """A kernel spec for this very interpreter (where hpcnn is installed), whatever other
    kernels the machine has; returns its name."""
    spec = tmp_path / "jupyter" / "kernels" / "hpcnn-test"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "hpcnn test", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    return "hpcnn-test"


def copy_notebook(name: str, tmp_path: Path) -> Path:
    """notebooks/<name> copied into a fresh working folder tmp_path/nb (where it writes its files)."""
    work = tmp_path / "nb"
    work.mkdir()
    shutil.copy(NOTEBOOKS / name, work)
    return work / name


def execute(path: Path, overrides: str, workdir: Path, kernel_name: str, append: str = ""):
    """Run a notebook with `overrides` placed after its cell tagged 'parameters' (as papermill
    does), and `append` as a last cell, in `workdir`; returns the executed notebook."""
    nb = nbformat.read(str(path), as_version=4)
    params = [i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1, f"{path.name}: one cell tagged 'parameters' expected"
    nb.cells.insert(params[0] + 1, nbformat.v4.new_code_cell(overrides))
    if append:
        nb.cells.append(nbformat.v4.new_code_cell(append))
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name=kernel_name,
                                     resources={"metadata": {"path": str(workdir)}})
    client.execute()
    return nb


def cell_with(nb, text):
    cells = [c for c in nb.cells if c.cell_type == "code" and text in c.source]
    assert len(cells) == 1, text
    return cells[0]


def all_text(cell):
    parts = []
    for o in cell.outputs:
        if o.output_type == "stream":
            parts.append(o.text)
        elif "text/plain" in o.get("data", {}):
            parts.append(o.data["text/plain"])
    return "\n".join(parts)


def notebook_text(nb) -> str:
    """Everything an executed notebook shows as text: streams, text/plain results, errors."""
    parts = [all_text(c) for c in nb.cells if c.cell_type == "code"]
    parts += ["\n".join(o.get("traceback", [])) + o.get("evalue", "")
              for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    return "\n".join(parts)


def test_committed_notebooks_carry_no_outputs():
    for path in NOTEBOOKS.glob("*.ipynb"):
        nb = nbformat.read(str(path), as_version=4)
        nbformat.validate(nb)
        for c in nb.cells:
            if c.cell_type == "code":
                assert not c.outputs and c.execution_count is None, f"{path.name}: clear the outputs before committing"


def test_progress_in_jupyter_is_one_output_per_bar(tmp_path, kernel):
    """verbose=1 in a notebook: each epoch's bar is one display, updated in place, whatever the
    number of batches (a '\\r' stream would store one output per redraw: 1,589 in one cell)."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("EPOCHS = 2", metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(
            "import numpy as np, hpcnn\n"
            "from hpcnn.layers import Dense, InputLayer\n"
            "hpcnn.progress.ProgressBar.min_interval = 0.0   # redraw after every batch\n"
            "rng = np.random.default_rng(0)\n"
            "x = rng.random((400, 4), dtype=np.float32); y = rng.integers(0, 3, 400)\n"
            "m = hpcnn.Sequential([InputLayer(input_shape=(4,)), Dense(3, activation='softmax')])\n"
            "m.compile('adam', 'sparse_categorical_crossentropy', ['accuracy'])\n"
            "h = m.fit(x, y, batch_size=2, epochs=EPOCHS, verbose=1)"),
        nbformat.v4.new_code_cell("m.evaluate(x, y, batch_size=2, verbose=1)"),
    ]
    path = tmp_path / "tiny.ipynb"
    nbformat.write(nb, str(path))
    out = execute(path, "", tmp_path, kernel)
    fit = out.cells[2]
    displays = [o for o in fit.outputs if o.output_type == "display_data"]
    streams = [o for o in fit.outputs if o.output_type == "stream"]
    assert len(displays) == 2, [o.output_type for o in fit.outputs]        # one per epoch's bar
    assert len(fit.outputs) <= 3, [o.output_type for o in fit.outputs]     # + "Training on cpu (...)"
    assert "Training on cpu" in "".join(s.text for s in streams) and "\r" not in "".join(s.text for s in streams)
    for e, d in enumerate(displays, 1):
        text = d.data["text/plain"]
        assert text.startswith(f"Epoch {e}/2\n") and "200/200 [====" in text, text
    ev = out.cells[3]
    assert len([o for o in ev.outputs if o.output_type == "display_data"]) == 1


def test_notebook_01_writes_its_data_to_the_data_dir_and_reuses_it(tmp_path, kernel, monkeypatch):
    data_dir, path = tmp_path / "data", copy_notebook("01_cifar10_cpu_vs_gpu.ipynb", tmp_path)
    work = path.parent
    monkeypatch.setenv("HPCNN_DATA_DIR", str(data_dir))
    quick = "EPOCHS = 2\nSYNTHETIC = True\nTRAIN_ROWS = 1000"
    nb = execute(path, quick, work, kernel)
    h5 = data_dir / "synthetic_cifar10_seed0_train1000.hdf5"
    assert h5.exists()
    assert not [p for p in work.iterdir() if p.suffix in (".hdf5", ".h5") and p.name != "cifar10_model.h5"]
    assert str(h5) in all_text(cell_with(nb, "write_hdf5(h5_path"))           # says where it went
    fit = cell_with(nb, "history = model.fit(")
    assert len([o for o in fit.outputs if o.output_type == "display_data"]) == 2   # EPOCHS bars
    assert len(fit.outputs) <= 3
    assert (work / "cifar10_model.h5").exists()
    # A second run reuses the file.
    before = h5.stat().st_mtime_ns
    nb = execute(path, quick, work, kernel)
    assert "Reusing " + str(h5) in all_text(cell_with(nb, "h5_path = hdf5_path("))
    assert h5.stat().st_mtime_ns == before


@pytest.mark.skipif(not os.path.isdir("/usr/share/datasets/fashion-mnist"),
                    reason="Debian's dataset-fashion-mnist is not installed (README's apt-get line installs it)")
def test_notebook_02_runs(tmp_path, kernel):
    path = copy_notebook("02_mnist_benchmark.ipynb", tmp_path)
    work = path.parent
    nb = execute(path, "EPOCHS = 1\nTRAIN_ROWS = 1000\nTEST_ROWS = 500", work, kernel)
    assert "mean_speed" in all_text(cell_with(nb, "step_stats(timer.times[10:]"))
    assert (work / "deep_mnist_bench.csv").exists()


def test_notebook_03_resnet_runs_on_synthetic_data(tmp_path, kernel, monkeypatch):
    """ResNet-20 with augmentation and a schedule, one short epoch on generated data: trains,
    skips the GPU part with the reason where there is none, draws the confusion matrix, saves and
    reloads the model."""
    import hpcnn
    data_dir, path = tmp_path / "data", copy_notebook("03_resnet_cifar10.ipynb", tmp_path)
    work = path.parent
    monkeypatch.setenv("HPCNN_DATA_DIR", str(data_dir))
    quick = "EPOCHS = 1\nWARMUP_EPOCHS = 0\nSYNTHETIC = True\nTRAIN_ROWS = 256"
    nb = execute(path, quick, work, kernel)
    assert "Trainable params: 269,722" in all_text(cell_with(nb, "model.summary("))
    fit = cell_with(nb, "history = model.fit(")
    assert len([o for o in fit.outputs if o.output_type == "display_data"]) == 1   # one epoch's bar
    gpu = all_text(cell_with(nb, "gpu_history = gpu_model.fit("))
    if not hpcnn.list_physical_devices("GPU"):
        assert "No GPU, the GPU run is skipped" in gpu
        assert notebook_text(nb).count(hpcnn.gpu_unavailable_reason()) == 1      # the reason, once
    assert "CPU: " in all_text(cell_with(nb, "print('CPU: %.1f s/epoch"))
    confusion = cell_with(nb, "np.add.at(confusion")
    assert "test accuracy" in all_text(confusion) and "per-class accuracy" in all_text(confusion)
    assert any("image/png" in o.get("data", {}) for o in confusion.outputs)        # the matrix is drawn
    assert "reloaded; same predictions: True" in all_text(cell_with(nb, "hpcnn.load_model("))
    assert (work / "resnet20_cifar10.h5").exists()
    assert not [p for p in work.iterdir() if p.suffix in (".hdf5",)]               # data went to the data dir


def test_notebook_03_shrinks_its_defaults_without_a_gpu(tmp_path, kernel, monkeypatch):
    """Left at None, notebook 03's EPOCHS and TRAIN_ROWS are the GPU lesson's (30 epochs of all
    50,000 images: about an hour on 2 CPU cores) only where a GPU is usable; without one, 5 epochs
    of 5,000 images, said in the output. Run up to its data cell (the settings are final there)."""
    import hpcnn
    data_dir, path = tmp_path / "data", copy_notebook("03_resnet_cifar10.ipynb", tmp_path)
    monkeypatch.setenv("HPCNN_DATA_DIR", str(data_dir))
    nb = nbformat.read(str(path), as_version=4)
    data_cell = next(i for i, c in enumerate(nb.cells) if "h5_path = hdf5_path(" in c.source)
    nb.cells = nb.cells[:data_cell + 1]
    nbformat.write(nb, str(path))
    out = execute(path, "SYNTHETIC = True", path.parent, kernel, append="print('settings', EPOCHS, TRAIN_ROWS)")
    settings = all_text(out.cells[-1])
    if hpcnn.list_physical_devices("GPU"):
        assert "settings 30 None" in settings
    else:
        assert "settings 5 5000" in settings
        assert "No GPU: 5 epochs on the first 5000 images" in all_text(cell_with(out, "h5_path = hdf5_path("))


# ----------------------------------------------------------------------------- the hpcnn kernel
# What `python -m ipykernel install --user --name hpcnn` registers: with --name alone, ipykernel
# takes the name as the display name too. The notebooks name exactly this, so JupyterLab shows one
# "hpcnn" kernel (a different display_name would show the notebook's and the registered one).
KERNELSPEC = {"name": "hpcnn", "display_name": "hpcnn", "language": "python"}
REGISTER = "python -m ipykernel install --user --name hpcnn"


def notebooks():
    paths = sorted(NOTEBOOKS.glob("*.ipynb"))
    assert len(paths) >= 3, paths
    return paths


def test_notebooks_ask_for_the_hpcnn_kernel():
    for path in notebooks():
        nb = json.loads(path.read_text())
        assert nb["metadata"]["kernelspec"] == KERNELSPEC, path.name


def test_every_cell_has_an_id():
    """nbformat >= 5.1 wants an id on every cell (MissingIDFieldWarning, a hard error later)."""
    for path in notebooks():
        raw = json.loads(path.read_text())
        assert (raw["nbformat"], raw["nbformat_minor"]) >= (4, 5), path.name
        missing = [i for i, c in enumerate(raw["cells"]) if not c.get("id")]
        assert not missing, f"{path.name}: cells {missing} have no id"
        ids = [c["id"] for c in raw["cells"]]
        assert len(set(ids)) == len(ids), f"{path.name}: duplicate cell ids"
        with warnings.catch_warnings():
            warnings.simplefilter("error")              # MissingIDFieldWarning included
            nbformat.validate(nbformat.reads(path.read_text(), as_version=4))


COMMAND = re.compile(r"python3?\s+-m\s+ipykernel\s+install\b[^`#\n]*")


def registration_lines(path: Path):
    """The `ipykernel install` commands a markdown file gives, one per line that names it, as
    written (in a code block or a code span; a trailing comment left out)."""
    found = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if "ipykernel install" in line:
            m = COMMAND.search(line)
            assert m, f"{path.name}: no `python -m ipykernel install ...` command in {line!r}"
            found.append(m.group(0).strip())
    return found


@pytest.mark.parametrize("doc", ["docs/notebooks.md", "README.md"])
def test_the_documented_command_registers_the_notebooks_kernel(doc, tmp_path):
    """The command as the page gives it (--user swapped for --prefix, to leave the home alone)
    registers a kernel named exactly as the notebooks ask, with the same display name."""
    lines = registration_lines(ROOT / doc)
    if doc == "README.md" and not lines:
        pytest.skip("README.md gives no `ipykernel install` command")
    assert lines, f"{doc} gives no `ipykernel install` command"
    for line in lines:
        assert re.search(r"ipykernel install .*--name hpcnn(\s|$)", line), f"{doc}: {line!r}"
        argv = shlex.split(line)
        assert argv[0] in ("python", "python3") and "--user" in argv, f"{doc}: {line!r}"
        prefix = tmp_path / argv[0]
        argv = [sys.executable] + [a for arg in argv[1:] for a in ((["--prefix", str(prefix)]) if arg == "--user"
                                                                  else [arg])]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        kernels = prefix / "share" / "jupyter" / "kernels"
        assert sorted(p.name for p in kernels.iterdir()) == [KERNELSPEC["name"]]
        spec = json.loads((kernels / "hpcnn" / "kernel.json").read_text())
        assert spec["display_name"] == KERNELSPEC["display_name"] and spec["language"] == KERNELSPEC["language"]


def test_docs_give_the_registration_command_exactly():
    assert REGISTER in registration_lines(ROOT / "docs" / "notebooks.md")


def test_a_kernel_without_hpcnn_is_told_what_to_do(tmp_path):
    """Each notebook's first code cell, in a Python where `import hpcnn` fails: a clear error that
    names that Python and the two commands that register the hpcnn kernel, not a bare
    ModuleNotFoundError."""
    for path in notebooks():
        nb = nbformat.read(str(path), as_version=4)
        first = next(c for c in nb.cells if c.cell_type == "code" and "import hpcnn" in c.source)
        code = "\n".join(line for line in first.source.splitlines() if not line.startswith("%"))
        script = tmp_path / f"{path.stem}.py"
        script.write_text("import sys\nsys.modules['hpcnn'] = None   # as where hpcnn is not installed\n" + code)
        r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
        assert r.returncode != 0
        last = r.stderr.strip().splitlines()
        assert "During handling" not in r.stderr, r.stderr            # one error, not a chain
        assert any(line.startswith("ModuleNotFoundError: hpcnn is not installed for this kernel's Python ("
                                   + sys.executable + ")") for line in last), r.stderr
        assert 'pip install --no-build-isolation ".[jupyter]"' in r.stderr and REGISTER in r.stderr, r.stderr


# ------------------------------------------------------ notebook 01 on synthetic data, without a GPU
# Records the figure-level texts and title of every figure the notebook renders (the inline
# backend draws each through its canvas' print_figure).
RECORD_FIGURES = """
import matplotlib.backend_bases as _backend_bases
_figures_seen = []
_print_figure = _backend_bases.FigureCanvasBase.print_figure
def _recording_print_figure(self, *args, **kwargs):
    fig = self.figure
    title = fig._suptitle.get_text() if fig._suptitle is not None else ''
    _figures_seen.append({'texts': [t.get_text() for t in fig.texts], 'title': title})
    return _print_figure(self, *args, **kwargs)
_backend_bases.FigureCanvasBase.print_figure = _recording_print_figure
"""
REPORT_FIGURES = "import json as _json\nprint('FIGURES=' + _json.dumps(_figures_seen))"


def test_notebook_01_on_synthetic_data_labels_its_figures_and_says_no_gpu_once(tmp_path, kernel, monkeypatch):
    import hpcnn
    monkeypatch.setenv("HPCNN_DATA_DIR", str(tmp_path / "data"))
    path = copy_notebook("01_cifar10_cpu_vs_gpu.ipynb", tmp_path)
    quick = "EPOCHS = 1\nSYNTHETIC = True\nTRAIN_ROWS = 500\n" + RECORD_FIGURES
    nb = execute(path, quick, path.parent, kernel, append=REPORT_FIGURES)
    report = all_text(nb.cells[-1])
    figures = json.loads(report.split("FIGURES=", 1)[1])
    pngs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if "image/png" in o.get("data", {})]
    # The sample grid, the curves and the predictions: each drawn once, each labelled.
    assert len(figures) == len(pngs) == 3, (figures, len(pngs))
    for fig in figures:
        assert any("synthetic data" in t for t in fig["texts"]), fig
        assert "synthetic CIFAR-shaped images" in fig["title"], fig
    assert "CPU" in figures[1]["title"] and "trained on CPU" in figures[2]["title"]
    for text in ("hpcnn.plot.samples(", "hpcnn.plot.history(", "hpcnn.plot.predictions("):
        assert "synthetic=SYNTHETIC" in cell_with(nb, text).source
    if not hpcnn.list_physical_devices("GPU"):
        reason = hpcnn.gpu_unavailable_reason()
        assert reason and notebook_text(nb).count(reason) == 1, notebook_text(nb)
        multi = all_text(cell_with(nb, "strategy = hpcnn.distribute.MirroredStrategy()"))
        assert "API demo only (no GPU): one epoch on 1,000 images" in multi
        assert "1 replica(s)" in multi
        assert "the GPU run is skipped" in all_text(cell_with(nb, "new_history = new_model.fit("))
