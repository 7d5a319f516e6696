"""Installing from the clone is incremental (issue: "reinstalls that do not start over"): every
`pip install` of the clone that the docs, notebooks, scripts and CI give builds without isolation,
and README's command (1) installs the build requirements first, exactly pyproject.toml's. pip's
isolated build puts scikit-build-core under a new temporary path each time, and scikit-build-core
then clears the build folder, so every object is compiled again (docs/install.md, "Reinstalling").
.ci/run installs twice and fails if the second install compiles anything; bench/RESULTS.md has
the timed second install."""
import json
import re
import shlex
import tomllib
from pathlib import Path
from tests.support import paths

ROOT = paths.ROOT

# Where a student or CI finds an install command.
SOURCES = ([ROOT / "README.md", ROOT / "environment.yml", ROOT / ".ci" / "run"]
           + sorted((ROOT / "docs").rglob("*.md")) + sorted((ROOT / "slurm").iterdir())
           + sorted((ROOT / "tools").glob("*.sh")) + sorted((ROOT / "notebooks").glob("*.ipynb")))
PIP_INSTALL = re.compile(r"pip install\b[^`\n&|;]*")


def texts():
    for path in SOURCES:
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".ipynb":
            text = "\n".join("".join(c["source"]) for c in json.loads(text)["cells"])
        yield path, text.replace("\\\n", " ")          # a shell line continued


def installs_the_clone(command: str) -> bool:
    """`pip install ... .` or `.[extras]` (quoted or not), the clone itself rather than a package."""
    words = [w.strip("\"'\\") for w in command.split()]
    return any(w == "." or w.startswith(".[") for w in words)


def test_the_scan_finds_the_installs():
    found = [(p, c) for p, t in texts() for c in PIP_INSTALL.findall(t) if installs_the_clone(c)]
    where = {p.name for p, _ in found}
    assert {"README.md", "install.md", "run", "environment.yml"} <= where, where


def test_every_install_of_the_clone_builds_without_isolation():
    bad = [f"{p.relative_to(ROOT)}: {c.strip()}" for p, t in texts() for c in PIP_INSTALL.findall(t)
           if installs_the_clone(c) and "--no-build-isolation" not in c]
    assert not bad, "an install of the clone with pip's isolated build starts the build over:\n" + "\n".join(bad)


def test_readme_installs_exactly_the_build_requirements_first():
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    line = next(line for line in readme.splitlines() if "apt-get install" in line and "hpcnn tutorial" in line)
    steps = [s.strip() for s in line.split("&&")]
    build = next(i for i, s in enumerate(steps) if "--no-build-isolation" in s)
    first = shlex.split(steps[build - 1])
    assert first[:2] == ["pip", "install"], steps[build - 1]
    assert sorted(first[2:]) == sorted(requires + ["ninja"]), \
        f"README installs {first[2:]} before the build; pyproject.toml requires {requires} (+ ninja)"
