"""Installing from the clone is incremental (issue: "reinstalls that do not start over"): every
`pip install` of the clone that the docs, notebooks, scripts and CI give builds without isolation,
and README's command (1) installs the build requirements first, exactly pyproject.toml's. pip's
isolated build puts scikit-build-core under a new temporary path each time, and scikit-build-core
then clears the build folder, so every object is compiled again (docs/install.md, "Reinstalling").
.ci/run installs twice and fails if the second install compiles anything; bench/RESULTS.md has
the timed second install.

Every install command a user can meet is checked (issue 43): the docs, scripts and notebooks, and
the skip reasons, error messages and docstrings in the sources (python/hpcnn, tests), read with
``ast`` so that a message split over several string literals is read whole, and prose whose
command runs over a line break ("`pip\ninstall ...`" in README) is read joined."""
import ast
import io
import json
import re
import shlex
import tokenize
import tomllib
from pathlib import Path
from tests.support import paths

ROOT = paths.ROOT

# Where a student or CI finds an install command.
SOURCES = ([ROOT / "README.md", ROOT / "environment.yml", ROOT / ".ci" / "run"]
           + sorted((ROOT / "docs").rglob("*.md")) + sorted((ROOT / "slurm").iterdir())
           + sorted((ROOT / "tools").glob("*.sh")) + sorted((ROOT / "notebooks").glob("*.ipynb")))
# Where a skip reason, an error message or a docstring tells a user what to install.
PY_SOURCES = sorted((ROOT / "python" / "hpcnn").rglob("*.py")) + sorted((ROOT / "tests").rglob("*.py"))
PIP_INSTALL = re.compile(r"pip install\b[^`\n&|;]*")
FENCE = re.compile(r"^(```|~~~)")


def prose_joined(text: str) -> str:
    """Markdown with each paragraph's lines joined (a command in backticks may wrap: "`pip\ninstall
    .`"); fenced code blocks and indented code lines kept line by line."""
    out, fenced = [], False
    for line in text.split("\n"):
        if FENCE.match(line.strip()):
            fenced = not fenced
        code = fenced or line.startswith("    ") or not line.strip()
        if out and not code and out[-1] and not out[-1].startswith("    ") and not FENCE.match(out[-1].strip()):
            out[-1] += " " + line.strip()
        else:
            out.append(line)
    return "\n".join(out)


def texts():
    for path in SOURCES:
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".ipynb":
            cells = json.loads(text)["cells"]
            text = "\n".join(prose_joined("".join(c["source"])) if c["cell_type"] == "markdown" else "".join(c["source"])
                             for c in cells)
        elif path.suffix == ".md":
            text = prose_joined(text)
        yield path, text.replace("\\\n", " ")          # a shell line continued


def python_texts(path: Path):
    """A Python file's strings (adjacent literals joined, as Python joins them; an f-string's
    literal parts) and comments, each a text of its own; a string's line breaks joined."""
    source = path.read_text(encoding="utf-8")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value.replace("\n", " ")
        elif isinstance(node, ast.JoinedStr):
            yield "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values).replace("\n", " ")
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            yield tok.string


def installs_the_clone(command: str) -> bool:
    """`pip install ... .` or `.[extras]` (quoted or not), or `hpcnn[extras]` (hpcnn is not on
    PyPI: that is the clone too), rather than another package."""
    words = [w.strip("\"'\\`()") for w in command.split()]
    return any(w == "." or w.startswith(".[") or w.startswith("hpcnn[") for w in words)


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


def python_installs():
    return [(p, c) for p in PY_SOURCES for t in python_texts(p) for c in PIP_INSTALL.findall(t)]


def test_the_scan_finds_the_installs_in_the_sources():
    where = {p.name for p, c in python_installs() if installs_the_clone(c)}
    # notebook_run.py's hint, live_keras.py's skip reason, tensorboard_events.py's message (split
    # over two literals), this file's own examples below.
    assert {"notebook_run.py", "live_keras.py", "tensorboard_events.py"} <= where, where


def test_every_install_of_the_clone_in_a_message_or_skip_reason_builds_without_isolation():
    bad = [f"{p.relative_to(ROOT)}: {c.strip()}" for p, c in python_installs()
           if installs_the_clone(c) and "--no-build-isolation" not in c and p.name != Path(__file__).name]
    assert not bad, ("a skip reason or message gives an install of the clone with pip's isolated build, which "
                     "starts the build over:\n" + "\n".join(bad))


def test_the_scan_reads_what_a_user_reads():
    """The shapes the scan must catch (each once was in the sources): a command wrapped in prose,
    one split over string literals, an extra without quotes, the package's own name."""
    prose = prose_joined("live tests need the extra (`pip\ninstall \".[test,jupyter,keras]\"`), which CI installs")
    assert [c for c in PIP_INSTALL.findall(prose) if installs_the_clone(c)] == ['pip install ".[test,jupyter,keras]"']
    split = ast.parse("X = ('needs `pip install --no-build-isolation '\n     '\".[keras]\"`')").body[0].value.value
    assert installs_the_clone(PIP_INSTALL.findall(split)[0]) and "--no-build-isolation" in split
    assert installs_the_clone("pip install .[jupyter,browser]") and installs_the_clone("pip install hpcnn[plot]")
    assert not installs_the_clone("pip install tensorboard") and not installs_the_clone("pip install matplotlib")


def test_extras_are_quoted():
    """`.[jupyter]` unquoted is a glob: zsh (a common login shell) stops with "no matches found".
    Every install of the clone with extras quotes them, as README's command (1) does."""
    commands = ([(p, c) for p, t in texts() for c in PIP_INSTALL.findall(t)]
                + [(p, c) for p, c in python_installs() if p.name != Path(__file__).name])
    bad = [f"{p.relative_to(ROOT)}: {c.strip()}" for p, c in commands
           if any(w.startswith(".[") for w in c.split())]
    assert not bad, "extras without quotes:\n" + "\n".join(bad)
