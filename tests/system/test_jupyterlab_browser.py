"""Notebook 01 in JupyterLab, in a real browser: what a student on Open OnDemand does.

A JupyterLab server on 127.0.0.1 (a free port, a token, a temporary root and isolated Jupyter
folders, so no user setting leaks in) with a kernelspec named ``hpcnn`` that runs this very
interpreter; Debian's headless Chromium, driven by Playwright with the system browser (never a
downloaded one), opens a quick copy of notebook 01, runs all cells from JupyterLab's Run menu and
checks that every code cell ran, no output shows an error and every figure renders. A screenshot
of the whole notebook goes to build/test-artifacts/ (kept by CI), whether the test passes or not.

Needs the `browser` extra (JupyterLab, Playwright), the `jupyter` extra (ipykernel) and
`apt-get install chromium`; skips with the reason where one is missing, except with
HPCNN_EXPECT_BROWSER=1 (CI), where a missing piece fails.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator, List

import pytest
from tests.support import paths
from tests.support.jupyterlab_page import (KERNEL, START_TIMEOUT_S, errors, image_outputs, lab_settings,
                                           open_notebook, outputs, pending, place_notebook, problems,
                                           run_all, save, screenshot, snapshot, wait_until_done)

EXPECT_BROWSER = os.environ.get("HPCNN_EXPECT_BROWSER") == "1"
WHY = 'the browser test needs `pip install --no-build-isolation ".[jupyter,browser]"` and `apt-get install chromium`'

if EXPECT_BROWSER:
    import ipykernel  # noqa: F401  (CI: a missing extra is an error, not a skip)
    import jupyterlab  # noqa: F401
    import nbformat
    from playwright.sync_api import Page, sync_playwright
else:
    pytest.importorskip("ipykernel", reason=WHY)
    pytest.importorskip("jupyterlab", reason=WHY)
    nbformat = pytest.importorskip("nbformat", reason=WHY)
    sync_api = pytest.importorskip("playwright.sync_api", reason=WHY)
    Page, sync_playwright = sync_api.Page, sync_api.sync_playwright

# Debian's Chromium, never one Playwright downloads (CI reaches only PyPI and apt).
CHROMIUM = shutil.which("chromium")
if CHROMIUM is None:
    if EXPECT_BROWSER:
        pytest.fail("Debian's chromium is not installed (apt-get install chromium)", pytrace=False)
    pytest.skip("the browser test needs Debian's chromium (apt-get install chromium)", allow_module_level=True)

ROOT = paths.ROOT
NOTEBOOK = "01_cifar10_cpu_vs_gpu.ipynb"
QUICK = "EPOCHS = 1\nSYNTHETIC = True\nTRAIN_ROWS = 1000"
# Notebook 01 draws at least the sample grid, the curves and the prediction grid.
MIN_FIGURES = 3
RUN_TIMEOUT_S = 360       # the whole notebook on a CPU node, with room to spare


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lab:
    """A JupyterLab server of this interpreter, in its own process group, with its own folders."""

    def __init__(self, base: Path) -> None:
        self.root = base / "root"
        self.data_dir = base / "hpcnn-data"
        self.runtime = base / "runtime"
        self.log_path = base / "jupyterlab.log"
        self.token = os.urandom(16).hex()
        kernels = base / "jupyter-path" / "kernels" / KERNEL
        for d in (self.root, self.runtime, kernels):
            d.mkdir(parents=True)
        # The kernel the hpcnn notebooks ask for, running this interpreter (where hpcnn is).
        (kernels / "kernel.json").write_text(json.dumps({
            "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": KERNEL, "language": "python"}))
        settings = base / "lab-settings"
        for rel, values in lab_settings().items():
            (settings / rel).parent.mkdir(parents=True, exist_ok=True)
            (settings / rel).write_text(json.dumps(values))
        env = dict(os.environ)
        env.pop("MPLBACKEND", None)       # the notebook's %matplotlib inline decides
        env.update({
            "JUPYTER_PATH": str(base / "jupyter-path"),
            "JUPYTER_CONFIG_DIR": str(base / "config"),
            "JUPYTER_DATA_DIR": str(base / "data"),
            "JUPYTER_RUNTIME_DIR": str(self.runtime),
            "JUPYTERLAB_SETTINGS_DIR": str(settings),
            "JUPYTERLAB_WORKSPACES_DIR": str(base / "workspaces"),
            "HPCNN_DATA_DIR": str(self.data_dir),
        })
        argv = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ServerApp.ip=127.0.0.1",
                f"--ServerApp.port={free_port()}", f"--IdentityProvider.token={self.token}",
                f"--ServerApp.root_dir={self.root}"]
        if os.geteuid() == 0:
            argv.append("--allow-root")   # CI containers run as root; the server refuses otherwise
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.url = self._wait_until_up()

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    def _wait_until_up(self) -> str:
        """The server's URL, read from the file it writes once it listens (the port it really got)."""
        deadline = time.monotonic() + START_TIMEOUT_S
        info = self.runtime / f"jpserver-{self.proc.pid}.json"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"JupyterLab exited with {self.proc.returncode}:\n{self.log_tail()}")
            if info.exists():
                try:
                    url = json.loads(info.read_text())["url"].rstrip("/")
                    self.api("/api/status", url=url)
                    return url
                except (ValueError, KeyError, OSError):
                    pass                  # half-written file or not answering yet
            time.sleep(0.2)
        pytest.fail(f"JupyterLab did not start in {START_TIMEOUT_S} s:\n{self.log_tail()}")

    def api(self, path: str, method: str = "GET", url: str = "") -> object:
        req = urllib.request.Request(f"{url or self.url}{path}", method=method,
                                     headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=10) as r:
            body = r.read()
        return json.loads(body) if body else None

    def kernel_processes(self) -> List[int]:
        """Kernels this server started: their command line names a connection file in this
        server's own runtime folder (kernels run in process groups of their own)."""
        pids = []
        for p in Path("/proc").iterdir():
            if p.name.isdigit():
                try:
                    if str(self.runtime).encode() in (p / "cmdline").read_bytes():
                        pids.append(int(p.name))
                except OSError:
                    pass
        return pids

    def stop(self) -> None:
        """Kernels shut down through the API, then the server; whatever is left is killed and
        reported."""
        if self.proc.poll() is None:
            try:
                for k in self.api("/api/kernels"):
                    self.api(f"/api/kernels/{k['id']}", method="DELETE")
            except OSError:
                pass
            os.killpg(self.proc.pid, signal.SIGTERM)   # the server shuts down what is left
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)       # helpers left in the server's group
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + 10
        while self.kernel_processes() and time.monotonic() < deadline:
            time.sleep(0.2)
        left = self.kernel_processes()
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        assert not left, f"kernel processes {left} outlived the server:\n{self.log_tail()}"


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Iterator[Lab]:
    server = Lab(tmp_path_factory.mktemp("jupyterlab"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium from the system, through Playwright (no `playwright install`)."""
    with sync_playwright() as p:
        # /dev/shm is small in containers; Chromium then uses /tmp.
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--disable-dev-shm-usage"])
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        yield context.new_page()
    finally:
        context.close()


def test_notebook_01_runs_in_jupyterlab_in_chromium(lab, page, capsys):
    path = place_notebook(ROOT / "notebooks" / NOTEBOOK, lab.root, QUICK)
    shot = "jupyterlab-notebook01.png"
    try:
        open_notebook(page, lab, path.name, "notebook01")
        start = time.monotonic()
        run_all(page)
        snap = wait_until_done(page, RUN_TIMEOUT_S)
        with capsys.disabled():
            print(f"\nnotebook 01 ran in JupyterLab in {time.monotonic() - start:.0f} s")
        if problems(snap):
            pytest.fail(f"an output shows a traceback:\n{problems(snap)}")
        if pending(snap):
            pytest.fail("these cells did not run:\n" + "\n".join(pending(snap)))
        # Every figure: loaded (a PNG the browser decoded) and laid out on the page.
        page.wait_for_function("() => [...document.querySelectorAll('.jp-OutputArea-output img')]"
                               ".every(i => i.complete)", timeout=10000)
        snap = snapshot(page)
        images = snap["images"]
        assert len(images) >= MIN_FIGURES, f"{len(images)} figures rendered, {MIN_FIGURES} at least expected"
        assert all(i["loaded"] for i in images), images
        assert all(i["visible"] for i in images), images
        # As many as the run made: the saved notebook's image outputs, each rendered.
        saved = save(page, path, ran=len(snap["cells"]))
        assert not errors(saved), errors(saved)
        assert image_outputs(saved) == len(images), (image_outputs(saved), len(images))
    finally:
        screenshot(page, shot, capsys)


def test_the_checks_see_an_error_a_traceback_and_a_figure(lab, page, capsys):
    """The checks above are not vacuous: a small notebook whose second cell writes a traceback to
    stderr and raises shows both, its figure is found and rendered, and Run All stops there (the
    wait returns at once, naming the cell that did not run)."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%matplotlib inline\nimport matplotlib.pyplot as plt\nplt.plot([1, 2, 3]);"),
        nbformat.v4.new_code_cell("import sys\nprint('Traceback (most recent call last): canary', file=sys.stderr)\n"
                                  "raise ValueError('canary error')"),
        nbformat.v4.new_code_cell("print('never runs')"),
    ]
    nb.metadata["kernelspec"] = {"name": KERNEL, "display_name": KERNEL, "language": "python"}
    nbformat.write(nb, str(lab.root / "canary.ipynb"))
    try:
        open_notebook(page, lab, "canary.ipynb", "canary")
        run_all(page)
        wait_until_done(page, 60)
        page.wait_for_function("() => [...document.querySelectorAll('.jp-OutputArea-output')]"
                               ".some(o => o.innerText.includes('canary error'))", timeout=10000)
        page.wait_for_function("() => [...document.querySelectorAll('.jp-OutputArea-output img')]"
                               ".every(i => i.complete)", timeout=10000)
        snap = snapshot(page)
        assert "ValueError" in problems(snap) and "canary error" in problems(snap), snap
        assert [t for t in snap["tracebacks"] if "canary" in t], snap
        assert [p.split(" ")[:2] for p in pending(snap)] == [["cell", "2"]], pending(snap)
        assert len(snap["images"]) == 1 and snap["images"][0] == {"loaded": True, "visible": True}, snap
        saved = save(page, lab.root / "canary.ipynb", ran=2)
        assert errors(saved) == ["ValueError: canary error"] and image_outputs(saved) == 1, outputs(saved)
    finally:
        screenshot(page, "jupyterlab-canary.png", capsys)
