"""The Open OnDemand app in ood/, as the portal runs it, on the test Slurm: the form's values render
submit.yml.erb and the template/ files (Ruby's ERB), the job starts JupyterLab on the node and the
connection file appears; Chromium follows the app's "Connect" link (view.html.erb) with the token,
opens notebook 01 (quick settings) with the hpcnn kernel, runs all cells and checks the outputs and
figures; the job is cancelled and JupyterLab and its kernel are gone.

Needs what the browser test needs (the jupyter and browser extras, Debian's chromium) and Ruby;
with HPCNN_EXPECT_SLURM=1 (CI) a missing piece fails instead of skipping."""
from __future__ import annotations

import json
import os
import re
import shutil
import time
import urllib.request
from pathlib import Path
from typing import Iterator, List

import pytest

from tests.support import jupyterlab_page as lab_page
from tests.support import ood_batch_connect as ood
from tests.support import slurm_cluster, slurm_jobs
from tests.support.paths import ROOT

APP = ROOT / "ood"
NOTEBOOK = "01_cifar10_cpu_vs_gpu.ipynb"
QUICK = "EPOCHS = 1\nSYNTHETIC = True\nTRAIN_ROWS = 1000"
EXPECT = os.environ.get("HPCNN_EXPECT_SLURM") == "1" or os.environ.get("HPCNN_EXPECT_BROWSER") == "1"
WHY = ('the Open OnDemand app test needs `pip install --no-build-isolation ".[jupyter,browser]"`, '
       '`apt-get install chromium ruby`')

if EXPECT:
    import ipykernel  # noqa: F401  (CI: a missing piece is an error, not a skip)
    import jupyterlab  # noqa: F401
    from playwright.sync_api import sync_playwright
else:
    pytest.importorskip("ipykernel", reason=WHY)
    pytest.importorskip("jupyterlab", reason=WHY)
    sync_playwright = pytest.importorskip("playwright.sync_api", reason=WHY).sync_playwright
CHROMIUM = shutil.which("chromium")
for missing, what in ((CHROMIUM is None, "chromium"), (not ood.ruby(), "ruby")):
    if missing:
        if EXPECT:
            pytest.fail(f"{what} is not installed (apt-get install {what})", pytrace=False)
        pytest.skip(WHY, allow_module_level=True)


def test_the_form_renders_the_submission_slurm_takes(tmp_path):
    """submit.yml.erb from the form's values: one task with the cores asked for, the partition, the
    hours; GPUs only when asked for."""
    values = ood.form_defaults(APP / "form.yml")
    assert set(values) == {"partition", "num_cores", "gpus", "bc_num_hours"}
    values.update(partition="gpu", num_cores="8", gpus="2", bc_num_hours="3")
    rendered = ood.render(APP / "submit.yml.erb", values, tmp_path)
    assert "batch_connect:\n  template: \"basic\"" in rendered
    assert ood.sbatch_options(rendered) == ["--partition=gpu", "--time=180", "--nodes=1", "--ntasks=1",
                                            "--cpus-per-task=8", "--gres=gpu:2"]
    values.update(gpus="0")
    assert "--gres=gpu:2" not in ood.sbatch_options(ood.render(APP / "submit.yml.erb", values, tmp_path))
    manifest = (APP / "manifest.yml").read_text()
    assert "role: batch_connect" in manifest and "category: Interactive Apps" in manifest


class Session:
    """The running app, seen as the portal sees it: the connection file's host, port and token."""

    def __init__(self, job: slurm_jobs.Job, conn: dict, home: Path) -> None:
        self.job, self.home = job, home
        self.host, self.port, self.token = conn["host"], int(conn["port"]), conn["password"]
        # No proxy here: the browser talks to the node directly, where the portal's proxy would.
        self.root_url = f"http://127.0.0.1:{self.port}"
        self.url = f"{self.root_url}/node/{self.host}/{self.port}"
        self.root = home

    def api(self, path: str, method: str = "GET") -> object:
        req = urllib.request.Request(f"{self.url}{path}", method=method,
                                     headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=10) as r:
            body = r.read()
        return json.loads(body) if body else None

    def log_tail(self) -> str:
        return self.job.text()[-4000:]

    def processes(self) -> List[int]:
        return list(self.job.processes())


@pytest.fixture(scope="module")
def session(slurm, job_data, tmp_path_factory) -> Iterator[Session]:
    base = tmp_path_factory.mktemp("ondemand")
    home = base / "home"
    home.mkdir()
    # The user's JupyterLab settings: deterministic headless (tests/support/jupyterlab_page.py).
    settings = home / ".jupyter" / "lab" / "user-settings"
    for rel, values in lab_page.lab_settings().items():
        (settings / rel).parent.mkdir(parents=True, exist_ok=True)
        (settings / rel).write_text(json.dumps(values))
    lab_page.place_notebook(ROOT / "notebooks" / NOTEBOOK, home, QUICK)
    values = ood.form_defaults(APP / "form.yml")
    values.update(partition="hpcnntest", num_cores="2")  # the site's partition; 2 cores
    options = ood.sbatch_options(ood.render(APP / "submit.yml.erb", values, base / "render"))
    session_dir = base / "session"
    script = ood.write_session(APP, values, session_dir)
    env = slurm_jobs.job_env(job_data, HOME=str(home))
    env.pop("MPLBACKEND", None)  # the notebook's %matplotlib inline decides
    for k in [k for k in env if k.startswith("JUPYTER")]:
        env.pop(k)  # the session's own, as a user's job would have
    job = slurm_jobs.submit(slurm, session_dir, env, *options, "--mem=4G", "--job-name=ood-jupyter",
                            f"--output={session_dir}/output.log", str(script), log_name="output.log")
    conn_file = session_dir / ood.CONNECTION_FILE

    def connection():
        if conn_file.exists() and conn_file.stat().st_size:
            return ood.read_connection(conn_file)
        if job.info().get("JobState") in slurm_cluster.END_STATES:
            raise AssertionError(f"the app's job ended before writing {conn_file}:\n{job.text()[-4000:]}")
        return None
    try:
        conn = slurm_cluster.wait_for(f"the app's connection file {conn_file}", connection, 240)
    except TimeoutError as e:
        slurm.run("scancel", str(job.id), check=False)
        raise TimeoutError(f"{e}:\n{job.text()[-4000:]}") from None
    assert set(conn) == {"host", "port", "password"} and len(conn["password"]) == 32, conn
    assert oct(conn_file.stat().st_mode & 0o777) == "0o600"  # the token: the user's only
    s = Session(job, conn, home)
    try:
        yield s
    finally:
        slurm.run("scancel", str(job.id), check=False)


@pytest.fixture(scope="module")
def page(session):
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--disable-dev-shm-usage"])
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 1000})
            yield context.new_page()
        finally:
            browser.close()


def test_jupyterlab_from_the_app_runs_notebook_01_and_stops_with_the_job(slurm, session, page, tmp_path, capsys):
    # The portal's "Connect" link, rendered from the connection file, followed in the browser.
    view = ood.render(APP / "view.html.erb", {"host": session.host, "port": session.port,
                                             "password": session.token}, tmp_path)
    (href,) = re.findall(r'href="([^"]+)"', view)
    assert href == f"/node/{session.host}/{session.port}/lab?token={session.token}"
    page.goto(session.root_url + href)
    page.wait_for_selector("#jp-main-dock-panel", timeout=lab_page.START_TIMEOUT_S * 1000)
    # The kernels the session offers: its own "hpcnn", running the environment's Python.
    specs = session.api("/api/kernelspecs")["kernelspecs"]
    assert "hpcnn" in specs, sorted(specs)
    argv = specs["hpcnn"]["spec"]["argv"]
    assert Path(argv[0]).resolve() == Path(shutil.which("python3", path=os.path.dirname(os.sys.executable))).resolve(), argv
    shot = "ood-jupyterlab-notebook01.png"
    try:
        lab_page.open_notebook(page, session, NOTEBOOK, "ood")
        kernels = session.api("/api/kernels")
        assert [k["name"] for k in kernels] == ["hpcnn"], kernels
        lab_page.run_all(page)
        snap = lab_page.wait_until_done(page, 360)
        if lab_page.problems(snap):
            pytest.fail(f"an output shows a traceback:\n{lab_page.problems(snap)}")
        if lab_page.pending(snap):
            pytest.fail("these cells did not run:\n" + "\n".join(lab_page.pending(snap)))
        page.wait_for_function("() => [...document.querySelectorAll('.jp-OutputArea-output img')]"
                               ".every(i => i.complete)", timeout=10000)
        snap = lab_page.snapshot(page)
        assert len(snap["images"]) >= 3 and all(i["loaded"] and i["visible"] for i in snap["images"]), snap["images"]
        saved = lab_page.save(page, session.home / NOTEBOOK, ran=len(snap["cells"]))
        assert not lab_page.errors(saved), lab_page.errors(saved)
        text = "".join("".join(o.get("text", "")) for o in lab_page.outputs(saved))
        assert "Training on cpu with 2 CPU threads" in text  # the form's 2 cores, through the job
        assert lab_page.image_outputs(saved) == len(snap["images"])
    finally:
        lab_page.screenshot(page, shot, capsys)

    # Cancelled (the portal's "Delete"): JupyterLab and its kernel end with the job.
    alive = session.processes()
    kernel = [p for p in alive if b"ipykernel_launcher" in Path(f"/proc/{p}/cmdline").read_bytes()]
    assert kernel, "no kernel process of the job found"
    slurm.run("scancel", str(session.job.id))
    info = session.job.wait_end(timeout=120)
    assert info["JobState"] == "CANCELLED", slurm_jobs.state_of(info)
    slurm_cluster.wait_for("JupyterLab and the kernel to end with the job",
                           lambda: not session.processes(), 60)
    with pytest.raises(OSError):
        urllib.request.urlopen(f"{session.url}/api/status", timeout=5)
