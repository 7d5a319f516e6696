"""The Slurm tests' cluster: one for the whole session (tests/support/slurm_cluster.py), started on
first use and stopped at the end, also when a test fails; jobs submitted from each test's folder.

Outside CI a machine that cannot run it (not root, Slurm not installed) skips these tests with the
reason; with HPCNN_EXPECT_SLURM=1 (CI) that fails them instead."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.support import slurm_cluster, slurm_jobs
from tests.support.slurm_cluster import LocalSlurm

EXPECT = os.environ.get("HPCNN_EXPECT_SLURM") == "1"


def skip_or_fail(why: str) -> None:
    if EXPECT:
        pytest.fail(f"HPCNN_EXPECT_SLURM=1 but {why}", pytrace=False)
    pytest.skip(why)


@pytest.fixture(scope="session")
def slurm(request):
    """The running test cluster (LocalSlurm). Its folder is under /tmp, not pytest's (whose 0700
    parent the munge user cannot pass through)."""
    why = slurm_cluster.why_not()
    if why:
        skip_or_fail(why)
    root = Path(tempfile.mkdtemp(prefix="hpcnn-slurm-"))
    cluster = LocalSlurm(root)
    try:
        cluster.start()
    except Exception as e:  # noqa: BLE001 - whatever stopped it is the reason
        log = cluster.log_tail()
        left = cluster.stop()
        skip_or_fail(f"the test Slurm did not start: {e}\n{log}" + (f"\nstill alive: {left}" if left else ""))
    try:
        yield cluster
    finally:
        left = cluster.stop()
        if not left and not request.session.testsfailed:
            shutil.rmtree(root, ignore_errors=True)
        else:  # the daemons' logs, for what failed
            print(f"\nthe test Slurm's folder (logs in {root / 'log'}) is kept")
    assert not left, f"Slurm processes left running after the tests: {left} (folder {root})"


@pytest.fixture(scope="session")
def job_data(tmp_path_factory) -> Path:
    """A data dir (HPCNN_DATA_DIR) with the generated CIFAR-shaped files the jobs train on, written
    before any job starts (jobs running together would otherwise write the same file at once)."""
    folder = tmp_path_factory.mktemp("slurm-data")
    slurm_jobs.write_data(folder)
    return folder
