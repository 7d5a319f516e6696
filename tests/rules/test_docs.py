"""README.md is the front door and docs/ holds the rest (issue "One house, upstairs too"): every
relative link between them leads somewhere (a file, and a heading when it names one), every page
is in mkdocs.yml's nav, and the README stays short and keeps the two commands exactly.

Pure Python: the markdown files are read and their links found by regex, so this runs without
MkDocs. Where MkDocs and mkdocstrings are installed (the `docs` extra), the strict site build runs
too; elsewhere it is skipped, saying so (.ci/run builds the site in a venv of its own)."""
import importlib.util
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from tests.support import paths

ROOT = paths.ROOT
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MKDOCS_YML = ROOT / "mkdocs.yml"

# The two commands, character for character (README, "The two commands"). .ci/run runs the second.
INSTALL_AND_RUN = ("apt-get update && apt-get install -y build-essential cmake libopenblas-dev libhdf5-dev "
                   "zlib1g-dev libdeflate-dev dataset-fashion-mnist libopenmpi-dev openmpi-bin && "
                   'pip install "scikit-build-core>=0.8" "pybind11>=2.12" ninja && '
                   'pip install --no-build-isolation ".[test,jupyter]" && hpcnn tutorial --synthetic --epochs 2')
RUN_TESTS = "python3 -m pytest -q -rs tests"
README_MAX_LINES = 150

FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
# [text](target) or [text](target "title"); the text may hold one level of brackets.
LINK = re.compile(r"\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def pages():
    """Every markdown page of the site (docs/, sub-folders included)."""
    return sorted(DOCS.rglob("*.md"))


def prose_lines(path):
    """(line number, text) outside fenced code blocks, with inline code spans blanked."""
    fence = None
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        m = FENCE.match(line)
        if m:
            if fence is None:
                fence = m.group(1)
            elif m.group(1) == fence:
                fence = None
            continue
        if fence is None:
            yield n, line


def slugify(text):
    """The id MkDocs gives a heading: Python-Markdown's toc extension's default slugify, applied to
    the heading's text as rendered (code, emphasis and link markup gone, their text kept)."""
    text = CODE_SPAN.sub(lambda m: m.group(2), text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)          # [text](url) -> text
    text = re.sub(r"(\*\*|__|\*)", "", text)                         # emphasis markers
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(path):
    """The ids of a page's headings, numbered as MkDocs numbers repeated ones (x, x_1, x_2)."""
    seen = set()
    for _, line in prose_lines(path):
        m = HEADING.match(line)
        if not m:
            continue
        slug = base = slugify(m.group(2))
        n = 1
        while slug in seen:
            slug = f"{base}_{n}"
            n += 1
        seen.add(slug)
    return seen


def links(path):
    """(line number, target) of every relative link in a page (web and mail links left out)."""
    for n, line in prose_lines(path):
        for m in LINK.finditer(CODE_SPAN.sub(lambda c: " " * len(c.group(0)), line)):
            target = m.group(1)
            if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):      # https:, mailto:, ...
                continue
            yield n, target


def link_cases():
    return [(f"{p.relative_to(ROOT)}:{n}", p, target) for p in [README] + pages() for n, target in links(p)]


def test_the_link_scan_finds_links():
    cases = link_cases()
    readme_targets = {t for where, p, t in cases if p == README}
    assert "docs/index.md" in readme_targets and "bench/RESULTS.md" in readme_targets
    assert any("#" in t for _, p, t in cases if p != README), "no anchored link found in docs/: the scan is broken"


@pytest.mark.parametrize("where,path,target", link_cases(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_relative_link_leads_somewhere(where, path, target):
    file_part, _, anchor = target.partition("#")
    dest = (path.parent / file_part).resolve() if file_part else path
    assert dest.exists(), f"{where}: links to {target}, which does not exist"
    if path != README:
        # MkDocs builds docs/ only: a page linking outside it fails the strict build.
        assert DOCS in dest.parents or dest == DOCS, \
            f"{where}: links to {target}, outside docs/ (name the file in code instead, as `bench/RESULTS.md`)"
    if dest.is_dir():
        return
    if anchor:
        assert dest.suffix == ".md", f"{where}: an anchor into a file that is not a page: {target}"
        assert anchor in anchors(dest), \
            f"{where}: {target}: {dest.relative_to(ROOT)} has no heading with the id #{anchor} " \
            f"(its ids: {sorted(anchors(dest))})"


def test_the_slug_rule_is_mkdocs_one():
    # Headings of these pages, with the ids MkDocs gives them.
    assert slugify("Training that survives the scheduler: backups, signals, requeue") == \
        "training-that-survives-the-scheduler-backups-signals-requeue"
    assert slugify("Proving it on a GPU node: the self-test") == "proving-it-on-a-gpu-node-the-self-test"
    assert slugify("GPUs (CUDA backend)") == "gpus-cuda-backend"
    assert slugify("`hpcnn.optimizers.schedules`") == "hpcnnoptimizersschedules"


def nav_pages():
    """The .md paths mkdocs.yml's nav names (`- page.md` or `- Title: page.md`), read as text."""
    text = MKDOCS_YML.read_text(encoding="utf-8")
    nav = text[text.index("\nnav:"):]
    return re.findall(r"^\s*-\s+(?:[^\n]*?:\s+)?([\w./-]+\.md)\s*$", nav, re.M)


def test_every_page_is_in_the_nav_and_every_nav_entry_is_a_page():
    nav = nav_pages()
    on_disk = [str(p.relative_to(DOCS)) for p in pages()]
    assert sorted(set(on_disk) - set(nav)) == [], "pages missing from mkdocs.yml's nav"
    assert sorted(set(nav) - set(on_disk)) == [], "mkdocs.yml's nav names pages that do not exist"
    assert len(nav) == len(set(nav)), "a page is in the nav twice"


def test_the_readme_is_short_and_keeps_the_two_commands():
    text = README.read_text(encoding="utf-8")
    n = len(text.splitlines())
    assert n <= README_MAX_LINES, f"README.md has {n} lines: move the detail into docs/ (at most {README_MAX_LINES})"
    lines = text.splitlines()
    assert "## The two commands" in lines
    # Each as an indented code line of its own, exactly as it is to be pasted.
    assert "    " + INSTALL_AND_RUN in lines, "README lost (or changed) command (1), install and run the main job"
    assert "    " + RUN_TESTS in lines, "README lost (or changed) command (2), run the tests"
    assert RUN_TESTS in (ROOT / ".ci" / "run").read_text(), "CI no longer runs README's test command"


def test_the_readme_links_every_topic_page():
    targets = {t.partition("#")[0] for _, t in links(README)}
    top = {f"docs/{p.name}" for p in DOCS.glob("*.md")}
    assert sorted(top - targets) == [], "pages the README does not link to"


@pytest.mark.skipif(not (importlib.util.find_spec("mkdocs") and importlib.util.find_spec("mkdocstrings_handlers")),
                    reason="MkDocs or mkdocstrings-python not installed (the docs extra); .ci/run builds the site in its own venv")
def test_the_site_builds_strictly(tmp_path):
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-f", str(MKDOCS_YML),
                        "-d", str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"mkdocs build --strict failed:\n{r.stdout}\n{r.stderr}"


# ---------------------------------------------------------------------- the API reference's names
# mkdocstrings renders only the members it finds and skips the others without a word, so the names
# each API page lists are checked here against the sources (read with ast: nothing imported).
MEMBER_BLOCK = re.compile(r"^::: (hpcnn[\w.]*)\n(?:    .*\n)*?      members:\n((?:        - \w+\n)+)", re.M)
PACKAGE = ROOT / "python"


def module_path(dotted: str) -> Path:
    base = PACKAGE.joinpath(*dotted.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def defined_names(path: Path) -> set:
    """The names a module defines or imports at its top level (what `from module import name` finds)."""
    import ast
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def api_members():
    out = []
    for page in sorted((DOCS / "api").glob("*.md")):
        for module, block in MEMBER_BLOCK.findall(page.read_text()):
            out += [(page.name, module, m) for m in re.findall(r"- (\w+)", block)]
    return out


def test_the_api_pages_list_members():
    assert len(api_members()) > 50  # the scan finds the lists it checks


@pytest.mark.parametrize("page,module,member", api_members(), ids=lambda v: str(v))
def test_every_member_an_api_page_lists_exists(page, module, member):
    path = module_path(module)
    assert path.exists(), f"docs/api/{page}: ::: {module} names a module that python/ does not have"
    assert member in defined_names(path), (f"docs/api/{page}: {module}.{member} is not defined in "
                                           f"{path.relative_to(ROOT)}: mkdocstrings would leave it out silently")
