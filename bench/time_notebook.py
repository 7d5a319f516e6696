"""Wall time of one notebook run headless (nbclient), as a student's "Run All" takes it (issue 24).

    python bench/time_notebook.py notebooks/01_cifar10_cpu_vs_gpu.ipynb --set SYNTHETIC=True \
        [--set EPOCHS=2 ...] [--data-dir DIR] [--runs 2] [--out executed.ipynb]

Each --set NAME=VALUE is placed after the notebook's cell tagged 'parameters' (as papermill does);
nothing else changes, so without --set EPOCHS/TRAIN_ROWS the notebook's defaults run. The data
directory (HPCNN_DATA_DIR) is a fresh empty one unless --data-dir is given: run 1 then includes
making and writing the dataset, runs 2.. reuse it. The kernel is this interpreter (a kernel spec
made in a temporary JUPYTER_PATH), so the hpcnn it imports is the one this Python imports.
Prints the total per run and the five slowest cells of the last run.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from datetime import datetime

import nbclient
import nbformat


def kernel_spec(root: str) -> str:
    """A kernel spec for this very interpreter under root/kernels; returns its name."""
    spec = os.path.join(root, "kernels", "hpcnn-bench")
    os.makedirs(spec, exist_ok=True)
    with open(os.path.join(spec, "kernel.json"), "w") as f:
        json.dump({"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                   "display_name": "hpcnn bench", "language": "python"}, f)
    return "hpcnn-bench"


def run_once(path: str, overrides: str, workdir: str, kernel: str):
    """(seconds, [(seconds, first line) per code cell]) of one execution of the notebook."""
    nb = nbformat.read(path, as_version=4)
    params = [i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])]
    if overrides:
        nb.cells.insert(params[0] + 1 if params else 0, nbformat.v4.new_code_cell(overrides))
    client = nbclient.NotebookClient(nb, timeout=3600, kernel_name=kernel, record_timing=True,
                                     resources={"metadata": {"path": workdir}})
    t = time.perf_counter()
    client.execute()
    total = time.perf_counter() - t
    cells = []
    for c in nb.cells:
        timing = c.metadata.get("execution", {})
        if c.cell_type == "code" and "iopub.execute_input" in timing and "shell.execute_reply" in timing:
            start = datetime.fromisoformat(timing["iopub.execute_input"].replace("Z", "+00:00"))
            end = datetime.fromisoformat(timing["shell.execute_reply"].replace("Z", "+00:00"))
            cells.append(((end - start).total_seconds(), c.source.splitlines()[0] if c.source else ""))
    return total, cells, nb


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("notebook")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a parameter override")
    p.add_argument("--data-dir", default=None, help="HPCNN_DATA_DIR (default: a fresh empty folder)")
    p.add_argument("--runs", type=int, default=2, help="run 1 with an empty data dir makes the data; later runs reuse it")
    p.add_argument("--out", default=None, help="write the last executed notebook here")
    a = p.parse_args()
    overrides = "\n".join(a.set)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["JUPYTER_PATH"] = os.path.join(tmp, "jupyter")
        os.environ["HPCNN_DATA_DIR"] = a.data_dir or os.path.join(tmp, "data")
        os.environ.setdefault("MPLBACKEND", "Agg")
        kernel = kernel_spec(os.environ["JUPYTER_PATH"])
        work = os.path.join(tmp, "work")
        os.makedirs(work)
        print(f"{a.notebook} with {(overrides or 'its defaults')!r}; data dir {os.environ['HPCNN_DATA_DIR']}")
        for r in range(1, a.runs + 1):
            empty = not os.listdir(os.environ["HPCNN_DATA_DIR"]) if os.path.isdir(os.environ["HPCNN_DATA_DIR"]) else True
            total, cells, nb = run_once(os.path.abspath(a.notebook), overrides, work, kernel)
            print(f"run {r} ({'empty data dir' if empty else 'data reused'}): {total:.1f} s", flush=True)
        for secs, first in sorted(cells, reverse=True)[:5]:
            print(f"  {secs:7.1f} s  {first[:70]}")
        if a.out:
            nbformat.write(nb, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
