"""``hpcnn notebook run``: a notebook executed headless, e.g. on a compute node from an sbatch script.

    hpcnn notebook run 01 --epochs 2 --synthetic -p TRAIN_ROWS=5000 --out results/nb01

- The settings given (``-p NAME=VALUE``, a Python literal; ``-r NAME=TEXT``, a string as typed;
  ``--epochs N`` is ``-p EPOCHS=N``, ``--synthetic`` is ``-p SYNTHETIC=True``) go into a new code
  cell right after the cell tagged ``parameters`` (papermill's convention), which they override.
- The kernel is this very interpreter (the Python where this hpcnn is installed), whatever kernels
  Jupyter has registered, with matplotlib's inline backend (figures land in the notebook, as in
  JupyterLab) and the output folder as its working directory: the files the notebook writes
  (models, CSVs) land beside the executed notebook.
- The executed notebook (same file name) is written into the output folder after every cell, each
  time atomically, so a failed cell, a timeout or a job killed at its time limit still leaves it
  there, showing how far it got; a failed cell ends the run with exit status 1, naming the cell and
  the error. One line per cell start and its time go to stdout, for a job log.
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import importlib.util
import json
import keyword
import os
import shutil
import sys
import tempfile
import time
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from . import _core
from .notebook_files import (NotebookError, declared_parameters, listing, parameters_cell_index, resolve)

KERNEL_NAME = "hpcnn-notebook-run"
# ipykernel's own default when MPLBACKEND is unset; set explicitly so that a job's MPLBACKEND=Agg
# (or a GUI backend from a login profile) cannot keep the figures out of the executed notebook.
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"
INSTALL_HINT = 'pip install --no-build-isolation ".[jupyter]" in the clone hpcnn was installed from'
DEFAULT_OUT = "notebook-results"


class MissingExtra(NotebookError):
    """nbclient, nbformat or ipykernel is not installed for this interpreter."""


def _jupyter() -> Tuple[Any, Any]:
    """nbclient and nbformat (the `jupyter` extra), imported when a run needs them: `hpcnn notebook
    list` and the rest of hpcnn work without them."""
    try:
        import nbclient
        import nbclient.exceptions
        import nbformat
    except ImportError as e:
        raise MissingExtra(f"running a notebook needs the `jupyter` extra ({e.name or e} is not installed for "
                           f"{sys.executable}): {INSTALL_HINT}") from None
    if importlib.util.find_spec("ipykernel") is None:
        raise MissingExtra(f"running a notebook needs the `jupyter` extra (ipykernel is not installed for "
                           f"{sys.executable}): {INSTALL_HINT}")
    return nbclient, nbformat


# ---------------------------------------------------------------------------------- parameters

def _name(assignment: str, option: str) -> Tuple[str, str]:
    name, sep, value = assignment.partition("=")
    name = name.strip()
    if not sep:
        raise NotebookError(f"{option} {assignment}: expected NAME=VALUE, e.g. {option} TRAIN_ROWS=5000")
    if not name.isidentifier() or keyword.iskeyword(name):
        raise NotebookError(f"{option} {assignment}: '{name}' is not a Python variable name")
    return name, value


def literal(assignment: str) -> Tuple[str, Any]:
    """`-p NAME=VALUE`: VALUE must be a Python literal (5000, 0.1, True, None, 'text', [1, 2])."""
    name, text = _name(assignment, "-p")
    try:
        return name, ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        if text.strip().lower() in ("true", "false", "none"):
            raise NotebookError(f"-p {assignment}: Python writes {text.strip().capitalize()}") from None
        raise NotebookError(f"-p {assignment}: '{text}' is not a Python literal (a number, True/False/None, a list, "
                            f"a quoted string: -p {name}=\"'{text}'\"); -r {name}={text} gives the string as typed") from None


def parse_parameters(literals: Sequence[str] = (), raws: Sequence[str] = (), epochs: Optional[int] = None,
                     synthetic: bool = False) -> Dict[str, Any]:
    """{name: value} from the command's options; a name given twice is an error (which one wins
    would be a guess)."""
    pairs: List[Tuple[str, Any]] = []
    if epochs is not None:
        pairs.append(("EPOCHS", epochs))
    if synthetic:
        pairs.append(("SYNTHETIC", True))
    pairs += [literal(a) for a in literals]
    pairs += [_name(a, "-r") for a in raws]
    out: Dict[str, Any] = {}
    for name, value in pairs:
        if name in out:
            raise NotebookError(f"{name} is given twice (--epochs is EPOCHS, --synthetic is SYNTHETIC)")
        out[name] = value
    return out


def parameters_source(params: Dict[str, Any]) -> str:
    """The injected cell's code: one assignment a line, each value as Python writes it."""
    lines = ["# Parameters from `hpcnn notebook run` (they replace those above)"]
    lines += [f"{name} = {value!r}" for name, value in params.items()]
    return "\n".join(lines)


def inject(nb: Any, nbformat: Any, params: Dict[str, Any], path: Path) -> None:
    """Put `params` in a new code cell right after the one tagged 'parameters' (tagged
    'injected-parameters', as papermill tags its own). A name the parameters cell does not set is an
    error: a typo (EPOCH=2) would otherwise change nothing, silently."""
    if not params:
        return
    i = parameters_cell_index(nb.cells, path)
    declared = declared_parameters(nb.cells[i].source)
    if declared is not None:
        unknown = [n for n in params if n not in declared]
        if unknown:
            raise NotebookError(f"{path.name} has no parameter {', '.join(unknown)}; its parameters: "
                                f"{', '.join(f'{k}={v}' for k, v in declared.items()) or 'none'}")
    cell = nbformat.v4.new_code_cell(parameters_source(params), metadata={"tags": ["injected-parameters"]})
    nb.cells.insert(i + 1, cell)


# ---------------------------------------------------------------------------------- files

def read_notebook(nbformat: Any, path: Path) -> Any:
    """The notebook, with an id on every cell (older files lack them; nbformat warns, then will fail)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", getattr(nbformat.validator, "MissingIDFieldWarning", Warning))
        try:
            nb = nbformat.read(str(path), as_version=4)
        except (OSError, ValueError) as e:
            raise NotebookError(f"cannot read notebook {path}: {e}") from None
    if (nb.nbformat, nb.nbformat_minor) >= (4, 5):
        for cell in nb.cells:
            if not cell.get("id"):
                cell["id"] = uuid.uuid4().hex[:8]
    return nb


def write_atomically(nbformat: Any, nb: Any, path: Path) -> None:
    """Write the notebook through the core's atomic writer (a temporary file beside `path`, flushed,
    then renamed; links and read-only targets refused), as hpcnn writes its model files: a reader,
    or a job killed mid-write, never sees half a notebook."""
    _core.data.write_file_atomically(str(path), nbformat.writes(nb).encode("utf-8"), "hpcnn notebook run")


@contextlib.contextmanager
def this_interpreter_kernel() -> Iterator[str]:
    """A kernel spec, in a temporary folder put first on JUPYTER_PATH, for ipykernel in this very
    interpreter; yields its name. The registered kernels (`python3` may be another Python, without
    hpcnn) are not used."""
    with tempfile.TemporaryDirectory(prefix="hpcnn-kernel-") as tmp:
        spec = Path(tmp) / "kernels" / KERNEL_NAME
        spec.mkdir(parents=True)
        (spec / "kernel.json").write_text(json.dumps({
            # ERROR: the kernel's own start-up warnings (one about local TCP without encryption, as
            # every Jupyter kernel runs) would read like a problem in a job log.
            "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}", "--log-level=ERROR"],
            "display_name": f"hpcnn ({sys.executable})", "language": "python",
            "env": {"MPLBACKEND": INLINE_BACKEND}}))
        old = os.environ.get("JUPYTER_PATH")
        os.environ["JUPYTER_PATH"] = tmp + (os.pathsep + old if old else "")
        try:
            yield KERNEL_NAME
        finally:
            if old is None:
                os.environ.pop("JUPYTER_PATH", None)
            else:
                os.environ["JUPYTER_PATH"] = old


# ---------------------------------------------------------------------------------- running

def duration(seconds: float) -> str:
    """12.3 s, or 2 min 05.0 s."""
    return f"{seconds:.1f} s" if seconds < 60 else f"{int(seconds // 60)} min {seconds % 60:04.1f} s"


def first_line(source: str, width: int = 70) -> str:
    """A cell's first non-blank line, shortened to `width`: how the job log names a cell."""
    line = next((s.strip() for s in source.splitlines() if s.strip()), "")
    return line if len(line) <= width else line[:width - 3] + "..."


class Progress:
    """nbclient's cell hooks: a line when a code cell starts and when it ends (for a job log), and
    the notebook written after each cell."""

    def __init__(self, nb: Any, save: Callable[[], None], out: Any = None):
        self.cells = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.source.strip()]
        self.nb, self.save, self.out = nb, save, out or sys.stdout
        self.current: Optional[int] = None   # the notebook index of the cell running now
        self.started = 0.0

    def label(self, index: int) -> str:
        n = len(self.cells)
        return f"[{self.cells.index(index) + 1:>{len(str(n))}}/{n}]" if index in self.cells else f"[cell {index}]"

    def line(self, text: str) -> None:
        print(text, file=self.out, flush=True)   # flushed: a job log shows it at once

    def on_cell_start(self, cell: Any, cell_index: int) -> None:
        if cell_index in self.cells:
            self.current, self.started = cell_index, time.perf_counter()
            self.line(f"{self.label(cell_index)} {first_line(cell.source)}")

    def mark(self, output: Any) -> None:
        """Show why the run stopped in the cell that was running (nbclient records no output for it)."""
        if self.current is not None:
            self.nb.cells[self.current].outputs.append(output)

    def on_cell_executed(self, cell: Any, cell_index: int, execute_reply: Any) -> None:
        status = (execute_reply or {}).get("content", {}).get("status", "ok")
        self.line(f"{self.label(cell_index)} {'done' if status == 'ok' else status} in "
                   f"{duration(time.perf_counter() - self.started)}")
        self.save()


@dataclass
class RunResult:
    """What a run left: the executed notebook, the seconds it took, and why it stopped early (None: it ran through)."""
    notebook: Path
    seconds: float
    failure: Optional[str] = None


def _error_output(nbformat: Any, ename: str, evalue: str) -> Any:
    return nbformat.v4.new_output("error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])


def run(notebook: Path, out_dir: Path, params: Dict[str, Any], timeout: Optional[int] = None,
        out: Any = None) -> RunResult:
    """Execute `notebook` with `params` injected, in `out_dir` (created), where the executed notebook
    is written under the same file name. A failing cell does not raise: RunResult.failure says which
    cell and what error; the notebook is written all the same."""
    nbclient, nbformat = _jupyter()
    log = out or sys.stdout
    nb = read_notebook(nbformat, notebook)
    inject(nb, nbformat, params, notebook)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / notebook.name
    if target.resolve() == notebook.resolve():
        raise NotebookError(f"--out {out_dir} would overwrite the notebook being run; choose another folder")
    progress = Progress(nb, lambda: write_atomically(nbformat, nb, target), log)
    print(f"hpcnn notebook run: {notebook} -> {target}", file=log)
    print(f"  kernel: {sys.executable}; {len(progress.cells)} code cells; per-cell timeout: "
          f"{f'{timeout} s' if timeout else 'none'}", file=log)
    if params:
        print("  parameters: " + ", ".join(f"{k}={v!r}" for k, v in params.items()), file=log)
    log.flush()
    failure = None
    start = time.perf_counter()
    with this_interpreter_kernel() as kernel:
        client = nbclient.NotebookClient(
            nb, kernel_name=kernel, timeout=timeout, resources={"metadata": {"path": str(out_dir.resolve())}},
            on_cell_start=progress.on_cell_start, on_cell_executed=progress.on_cell_executed)
        try:
            client.execute()
        except nbclient.exceptions.CellExecutionError as e:
            failure = f"failed: {e.ename}: {e.evalue}"
        except nbclient.exceptions.CellTimeoutError:
            failure = f"ran longer than --timeout {timeout} s and was stopped"
            progress.mark(_error_output(nbformat, "CellTimeoutError", failure))
        except nbclient.exceptions.DeadKernelError:
            failure = ("stopped: the kernel died (out of memory? the job's --mem is a common limit; or the "
                       "process was killed)")
            progress.mark(_error_output(nbformat, "DeadKernelError", failure))
        finally:
            write_atomically(nbformat, nb, target)
    seconds = time.perf_counter() - start
    if failure is not None:
        cell = nb.cells[progress.current] if progress.current is not None else None
        where = f"cell {progress.label(progress.current)} ({first_line(cell.source)})" if cell else "the kernel"
        failure = f"{where} {failure}"
    return RunResult(target, seconds, failure)


# ---------------------------------------------------------------------------------- the command

def add_arguments(p: argparse.ArgumentParser) -> None:
    """`hpcnn notebook run|list|copy`."""
    sub = p.add_subparsers(dest="notebook_cmd", required=True, metavar="{run,list,copy}")
    r = sub.add_parser("run", help="execute a notebook headless (a compute node, an sbatch script)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("notebook", help="a shipped notebook's number or name (01, 1, cifar10; see `hpcnn notebook "
                                    "list`) or a path to an .ipynb")
    r.add_argument("--epochs", type=int, default=None, help="the same as -p EPOCHS=N")
    r.add_argument("--synthetic", action="store_true", help="the same as -p SYNTHETIC=True (generated data)")
    r.add_argument("-p", "--parameter", dest="literals", action="append", default=[], metavar="NAME=VALUE",
                   help="set a parameter to a Python literal: -p TRAIN_ROWS=5000, -p LR=0.01, -p DATA=None, "
                        "-p NAME=\"'text'\" (repeatable)")
    r.add_argument("-r", "--raw", dest="raws", action="append", default=[], metavar="NAME=TEXT",
                   help="set a parameter to a string, as typed, no quotes needed: -r DATA=/scratch/cifar.h5")
    r.add_argument("--out", default=None, help=f"the folder for the executed notebook and the files it writes "
                                               f"(default: {DEFAULT_OUT}/<notebook name>)")
    r.add_argument("--timeout", type=int, default=None, metavar="S",
                   help="stop a cell that runs longer than S seconds (default: no limit)")
    sub.add_parser("list", help="the notebooks hpcnn ships, with their parameters")
    c = sub.add_parser("copy", help="copy a shipped notebook into a folder, to open and change it")
    c.add_argument("notebook", help="its number or name (see `hpcnn notebook list`)")
    c.add_argument("dir", nargs="?", default=".", help="where to put it (default: here)")
    c.add_argument("--force", action="store_true", help="replace a file of the same name")


def _copy(a: argparse.Namespace) -> int:
    source = resolve(a.notebook)
    target = Path(a.dir) / source.name
    if target.exists() and not a.force:
        raise NotebookError(f"{target} exists (your changes?); --force replaces it")
    Path(a.dir).mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    print(f"{source} -> {target}")
    return 0


def _run(a: argparse.Namespace) -> int:
    params = parse_parameters(a.literals, a.raws, a.epochs, a.synthetic)
    notebook = resolve(a.notebook)
    out_dir = Path(a.out) if a.out else Path(DEFAULT_OUT) / notebook.stem
    result = run(notebook, out_dir, params, a.timeout)
    if result.failure:
        print(f"hpcnn notebook run: {result.failure}\nThe executed notebook, up to the error: {result.notebook}",
              file=sys.stderr)
        return 1
    print(f"done in {duration(result.seconds)}: {result.notebook}")
    written = sorted(p.name for p in result.notebook.parent.iterdir()
                     if p.name != result.notebook.name and not p.name.startswith("."))
    if written:
        print(f"  beside it: {', '.join(written)}")
    return 0


def main(a: argparse.Namespace) -> int:
    """`hpcnn notebook ...`: 0 done, 1 a cell failed (or stopped), 2 a mistake in the command."""
    try:
        if a.notebook_cmd == "list":
            print(listing())
            return 0
        if a.notebook_cmd == "copy":
            return _copy(a)
        return _run(a)
    except NotebookError as e:
        print(f"hpcnn notebook {a.notebook_cmd}: {e}", file=sys.stderr)
        return 2


__all__ = ["MissingExtra", "literal", "parse_parameters", "parameters_source", "inject", "read_notebook",
           "write_atomically", "this_interpreter_kernel", "run", "RunResult", "add_arguments", "main"]
