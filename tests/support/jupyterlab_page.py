"""JupyterLab in a browser, page by page, for the browser tests (tests/system/test_jupyterlab_browser.py,
tests/system/slurm/test_ood_jupyter.py): deterministic user settings, a quick copy of a notebook,
opening it with its kernel, Run All from the menu, waiting for the run, saving, a screenshot, and
what the saved notebook holds.

A `lab` here is any object with ``url`` (the server's base URL, no trailing slash), ``token``,
``api(path, method='GET')`` (the server's REST API, token-authenticated) and ``log_tail()``;
`page` is a Playwright page (its sync API)."""
from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Protocol

import pytest

from tests.support import paths

if TYPE_CHECKING:
    from playwright.sync_api import Page

KERNEL = "hpcnn"
ARTIFACTS = paths.ROOT / "build" / "test-artifacts"
START_TIMEOUT_S = 90      # server up, page loaded, kernel idle


class LabServer(Protocol):
    url: str
    token: str

    def api(self, path: str, method: str = "GET") -> object: ...

    def log_tail(self) -> str: ...


def lab_settings() -> Dict[str, dict]:
    """User settings that make JupyterLab deterministic headless: no news or update toasts, and
    every cell kept in the DOM (JupyterLab 4 otherwise renders only the cells on screen, so the
    outputs of the others could not be checked)."""
    return {
        "@jupyterlab/apputils-extension/notification.jupyterlab-settings":
            {"fetchNews": "false", "checkForUpdates": False},
        "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    }




def place_notebook(source: Path, root: Path, quick: str) -> Path:
    """A copy in the server's root folder, with `quick` appended to its cell tagged 'parameters' and
    the hpcnn kernelspec (whatever the committed one says), so it opens with the hpcnn kernel."""
    nb = json.loads(source.read_text())
    params = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(params) == 1, f"{source.name}: one cell tagged 'parameters' expected"
    text = params[0]["source"]
    text = "".join(text) if isinstance(text, list) else text
    params[0]["source"] = text + "\n# The browser test's quick setting\n" + quick
    nb["metadata"]["kernelspec"] = {"name": KERNEL, "display_name": KERNEL, "language": "python"}
    path = root / source.name
    path.write_text(json.dumps(nb, indent=1))
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


def open_notebook(page: Page, lab: "LabServer", name: str, workspace: str) -> None:
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
