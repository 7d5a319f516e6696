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
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Dict, Iterator, List

import pytest
from tests.support import paths

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
ARTIFACTS = ROOT / "build" / "test-artifacts"
QUICK = "EPOCHS = 1\nSYNTHETIC = True\nTRAIN_ROWS = 1000"
KERNEL = "hpcnn"
# Notebook 01 draws at least the sample grid, the curves and the prediction grid.
MIN_FIGURES = 3
RUN_TIMEOUT_S = 360       # the whole notebook on a CPU node, with room to spare
START_TIMEOUT_S = 90      # server up, page loaded, kernel idle


def lab_settings() -> Dict[str, dict]:
    """User settings that make JupyterLab deterministic headless: no news or update toasts, and
    every cell kept in the DOM (JupyterLab 4 otherwise renders only the cells on screen, so the
    outputs of the others could not be checked)."""
    return {
        "@jupyterlab/apputils-extension/notification.jupyterlab-settings":
            {"fetchNews": "false", "checkForUpdates": False},
        "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    }


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


def place_notebook(source: Path, lab: Lab, quick: str) -> Path:
    """A copy in the server's root, with `quick` appended to its cell tagged 'parameters' and the
    hpcnn kernelspec (whatever the committed one says), so it opens with the hpcnn kernel."""
    nb = nbformat.read(str(source), as_version=4)
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1, f"{source.name}: one cell tagged 'parameters' expected"
    params[0].source += "\n# The browser test's quick setting\n" + quick
    nb.metadata["kernelspec"] = {"name": KERNEL, "display_name": KERNEL, "language": "python"}
    path = lab.root / source.name
    nbformat.write(nb, str(path))
    return path


# One look at the open notebook: each code cell's prompt and first line, the outputs that show a
# traceback, the kernel's status and the figures. JupyterLab 4 renders an error output as stderr
# text (data-mime-type application/vnd.jupyter.stderr, with no mark of its own), so an error shows
# here as stderr text holding 'Traceback', like a traceback a cell printed; the saved notebook
# tells them apart (output_type 'error').
SNAPSHOT_JS = """() => {
  const nb = document.querySelector('#jp-main-dock-panel .jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook');
  if (!nb) return null;
  const text = sel => [...nb.querySelectorAll(sel)].map(e => e.innerText);
  const indicator = document.querySelector('.jp-Notebook-ExecutionIndicator');
  return {
    cells: [...nb.querySelectorAll('.jp-CodeCell')].map(c => ({
      prompt: (c.querySelector('.jp-InputPrompt') || {}).innerText || '',
      first: ((c.querySelector('.cm-content') || {}).innerText || '').split('\\n')[0]})),
    tracebacks: text('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"],' +
                     '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.error"]')
      .filter(t => t.includes('Traceback')),
    status: indicator ? indicator.dataset.status : null,
    images: [...nb.querySelectorAll('.jp-OutputArea-output[data-mime-type="image/png"] img')].map(i => {
      const r = i.getBoundingClientRect(), s = getComputedStyle(i);
      return {loaded: i.complete && i.naturalWidth > 0 && i.naturalHeight > 0,
              visible: r.width > 0 && r.height > 0 && s.visibility !== 'hidden' && s.display !== 'none'};
    }),
  };
}"""

RAN = re.compile(r"^\[\d+\]:?$")


def snapshot(page: Page) -> dict:
    snap = page.evaluate(SNAPSHOT_JS)
    assert snap is not None, "no notebook open in JupyterLab's main area"
    return snap


def pending(snap: dict) -> List[str]:
    return [f"cell {i} {c['prompt'] or '[ ]'} {c['first']!r}"
            for i, c in enumerate(snap["cells"]) if not RAN.match(c["prompt"].strip())]


def problems(snap: dict) -> str:
    return "\n---\n".join(t[:3000] for t in snap["tracebacks"])


def stopped(snap: dict) -> bool:
    """Run All ended early: the kernel idle, no cell queued or running ('[*]'), some cells run
    and some not (after an error, JupyterLab puts the queued cells back to '[ ]')."""
    prompts = [c["prompt"].strip() for c in snap["cells"]]
    ran = [p for p in prompts if RAN.match(p)]
    return snap["status"] == "idle" and "[*]:" not in prompts and 0 < len(ran) < len(prompts)


def open_notebook(page: Page, lab: Lab, name: str, workspace: str) -> None:
    """Opens `name` in a fresh workspace (nothing restored) and waits for its kernel to be idle."""
    page.goto(f"{lab.url}/lab/workspaces/{workspace}/tree/{name}?token={lab.token}")
    page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-CodeCell", timeout=START_TIMEOUT_S * 1000)
    # The indicator reads 'idle' once before any kernel exists, then 'initializing', 'connecting'
    # and 'idle': so the server must also know the session's kernel, started and idle.
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        sessions = [s for s in lab.api("/api/sessions") if s["path"].endswith(name)]
        status = page.evaluate("() => { const i = document.querySelector('.jp-Notebook-ExecutionIndicator');"
                               " return i ? i.dataset.status : null; }")
        if sessions and sessions[0]["kernel"]["execution_state"] == "idle" and status == "idle":
            break
        if time.monotonic() > deadline:
            pytest.fail(f"no idle kernel {START_TIMEOUT_S} s after opening {name}: sessions {sessions}, "
                        f"indicator {status!r}\n{lab.log_tail()}")
        page.wait_for_timeout(250)
    assert [s["kernel"]["name"] for s in sessions] == [KERNEL], sessions


def run_all(page: Page) -> None:
    """Run > Run All Cells, from JupyterLab's menu bar, as a student does."""
    page.locator("#jp-menu-panel .lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()


def wait_until_done(page: Page, timeout_s: float) -> dict:
    """Every code cell has an execution count and the kernel is idle, or a traceback shows, or
    Run All stopped early (after an error the rest never runs): the last snapshot."""
    deadline = time.monotonic() + timeout_s
    page.wait_for_timeout(500)            # the first cell is queued
    stopped_for = 0
    while True:
        snap = snapshot(page)
        if snap["tracebacks"]:
            return snap
        if not pending(snap) and snap["status"] == "idle":
            return snap
        stopped_for = stopped_for + 1 if stopped(snap) else 0
        if stopped_for >= 3:              # seen three times, a second apart: not a passing state
            return snap
        if time.monotonic() > deadline:
            pytest.fail(f"after {timeout_s:.0f} s the kernel is {snap['status']!r} and these cells have not "
                        "run:\n" + "\n".join(pending(snap)))
        page.wait_for_timeout(1000)


def save(page: Page, path: Path, ran: int) -> dict:
    """Saves the notebook from JupyterLab (Ctrl+S) and returns the file once it holds the run
    (`ran` code cells with an execution count)."""
    page.locator(".jp-NotebookPanel .jp-Notebook").first.click(position={"x": 5, "y": 5})
    page.keyboard.press("Control+s")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        nb = json.loads(path.read_text())
        counts = [c.get("execution_count") for c in nb["cells"] if c["cell_type"] == "code"]
        if len([c for c in counts if c]) == ran:
            return nb
        page.wait_for_timeout(500)
    pytest.fail(f"{path.name} was not saved with its outputs in 30 s")


# The window height that shows the whole notebook, scrolled to its top: JupyterLab scrolls inside
# a page of fixed size, so a "full page" shot alone would show one screen of it.
WHOLE_NOTEBOOK_JS = """() => {
  const outer = document.querySelector('.jp-NotebookPanel .jp-WindowedPanel-outer');
  const cells = document.querySelectorAll('.jp-NotebookPanel .jp-Cell');
  if (!outer || !cells.length) return 0;
  outer.scrollTop = 0;
  const box = outer.getBoundingClientRect();
  const content = cells[cells.length - 1].getBoundingClientRect().bottom - box.top;
  return Math.ceil(window.innerHeight - box.height + content + 40);
}"""


def screenshot(page: Page, name: str, capsys) -> Path:
    """The whole notebook, top to bottom, in build/test-artifacts/<name>; prints the path past
    pytest's capture (CI keeps the file as an artifact) and returns it."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    out = ARTIFACTS / name
    height = page.evaluate(WHOLE_NOTEBOOK_JS)
    # Chromium draws at most 16384 pixels high in one shot.
    page.set_viewport_size({"width": 1400, "height": max(1000, min(int(height), 16000))})
    page.wait_for_timeout(500)            # JupyterLab lays out the taller window
    page.evaluate(WHOLE_NOTEBOOK_JS)      # and may have scrolled to the active cell again
    page.screenshot(path=str(out), full_page=True)
    with capsys.disabled():
        print(f"\nscreenshot: {out}")
    return out


def outputs(nb: dict) -> List[dict]:
    return [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]


def errors(nb: dict) -> List[str]:
    """The saved notebook's error outputs, as 'ValueError: message'."""
    return [f"{o['ename']}: {o['evalue']}" for o in outputs(nb) if o["output_type"] == "error"]


def image_outputs(nb: dict) -> int:
    return sum("image/png" in o.get("data", {}) for o in outputs(nb))


def test_notebook_01_runs_in_jupyterlab_in_chromium(lab, page, capsys):
    path = place_notebook(ROOT / "notebooks" / NOTEBOOK, lab, QUICK)
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
