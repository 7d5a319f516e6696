"""Every script that activates conda (slurm/, tools/) runs conda's activation with `set -u` off and
turns it on again after: conda's activate scripts (and packages' activate.d hooks) read variables
that may be unset, and under `set -u` the job would end at `conda activate` with "unbound variable".

Each script's conda block (`if command -v conda ...; then ... fi`) is run in bash under the
script's own `set` line, with a fake conda on PATH whose conda.sh and whose `activate` read an unset
variable, as conda's do; the block must activate and leave `set -u` as it found it."""
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from tests.support import paths

ROOT = paths.ROOT
BASH = shutil.which("bash")
SCRIPTS = sorted(p for d in ("slurm", "tools") for p in (ROOT / d).iterdir()
                 if p.is_file() and "conda activate" in p.read_text())

FAKE_CONDA_SH = """
# as conda's own: reads variables that are unset in a batch job
if [ -n "$CONDA_TEST_NEVER_SET_1" ]; then :; fi
conda() {
  if [ "$1" = activate ]; then
    : "${CONDA_TEST_NEVER_SET_2}"   # an activate.d hook reading an unset variable
    echo "ACTIVATED $2"
  fi
}
"""


def conda_block(text):
    m = re.search(r"(?ms)^([ \t]*)if command -v conda >/dev/null 2>&1; then\n.*?^\1fi$", text)
    return m.group(0) if m else None


def set_line(text):
    m = re.search(r"(?m)^set -[a-z]+( -o [a-z]+| pipefail)*$", text)
    return m.group(0) if m else "set -euo pipefail"


def test_the_scripts_that_activate_conda_are_found():
    names = {p.name for p in SCRIPTS}
    assert {"cpu-train.sbatch", "gpu-train.sbatch", "notebook.sbatch", "bench-sweep.sh"} <= names, names


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_conda_activates_under_set_u(script, tmp_path):
    if not BASH:
        pytest.skip("bash is not installed")
    text = script.read_text()
    block = conda_block(text)
    assert block, f"{script.name} activates conda outside an `if command -v conda` block"
    base = tmp_path / "conda"
    (base / "etc" / "profile.d").mkdir(parents=True)
    (base / "etc" / "profile.d" / "conda.sh").write_text(FAKE_CONDA_SH)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "conda").write_text(f"#!/bin/sh\n[ \"$1\" = info ] && echo {base}\n")
    (bin_dir / "conda").chmod(0o755)
    code = f"{set_line(text)}\n{block}\necho \"AFTER $-\"\n"
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "HPCNN_CONDA_ENV": "testenv"}
    r = subprocess.run([BASH, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "ACTIVATED testenv" in r.stdout, out
    after = re.search(r"AFTER (\S*)", r.stdout)
    assert after and "u" in after.group(1), f"`set -u` is not on again after the activation: {out}"
