"""The API reference reads (issue 43, item 5). The docstrings are NumPy style, so mkdocs.yml tells
mkdocstrings so (with google style every parameter ran into one paragraph); a public function or
class that describes its parameters one per line does so in a NumPy ``Parameters`` section, which
the site renders as a list; and the site's width shows wide tables at 1280 px.

The source checks run everywhere. The HTML checks build the site (a few seconds; mkdocstrings reads
the sources, hpcnn is not imported) with the docs extra's tools, found as $HPCNN_MKDOCS, `mkdocs`
on PATH or build/docs-venv/bin/mkdocs (where .ci/run installs them), or read a site already built
($HPCNN_DOCS_SITE: .ci/run's docs step runs this file on build/site); without them they skip and
say so. The width check also needs Playwright and Chromium (the `browser` extra)."""
import ast
import html.parser
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from tests.support import paths

ROOT = paths.ROOT
PACKAGE = ROOT / "python" / "hpcnn"
NO_MKDOCS = ("needs MkDocs and the docs extra's tools (pyproject.toml): python3 -m venv build/docs-venv && "
             "build/docs-venv/bin/pip install mkdocs mkdocstrings mkdocstrings-python pymdown-extensions")


# ---------------------------------------------------------------------- the sources
def test_mkdocs_reads_numpy_style():
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert re.findall(r"^\s*docstring_style:\s*(\S+)", text, re.M) == ["numpy"]


def public_objects():
    """(module path, object name, parameter names, docstring) of every public function and class
    (its __init__'s parameters) at a module's top level, and of their public methods."""
    for path in sorted(PACKAGE.rglob("*.py")):
        if any(part.startswith("_") and part != "__init__.py" for part in path.relative_to(PACKAGE).parts):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                init = next((b for b in node.body if isinstance(b, ast.FunctionDef) and b.name == "__init__"), None)
                yield path, node.name, params(init) if init else [], ast.get_docstring(node) or ""
                for b in node.body:
                    if isinstance(b, ast.FunctionDef) and not b.name.startswith("_"):
                        yield path, f"{node.name}.{b.name}", params(b), ast.get_docstring(b) or ""
            elif isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                yield path, node.name, params(node), ast.get_docstring(node) or ""


def params(fn):
    a = fn.args
    return [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs if x.arg not in ("self", "cls")]


def section(doc: str, title: str) -> str:
    m = re.search(rf"^{title}\n-+\n(.*?)(?=^\S[^\n]*\n-+\n|\Z)", doc, re.M | re.S)
    return m.group(1) if m else ""


def described_one_per_line(doc: str, names) -> list:
    """The parameters that start a line of the docstring as 'name:' or 'name : type'."""
    if not names:
        return []
    return re.findall(rf"^\s*({'|'.join(map(re.escape, names))})\s?:\s", doc, re.M)


def test_parameters_described_one_per_line_are_in_a_numpy_section():
    """'path: the tarball...' on a line of its own reads as a list in the source and renders as one
    paragraph: such lines belong in a ``Parameters`` / ``----------`` section."""
    bad = []
    for path, name, names, doc in public_objects():
        outside = doc.replace(section(doc, "Parameters"), "")
        found = described_one_per_line(outside, names)
        if found:
            bad.append(f"{path.relative_to(ROOT)}: {name}: {', '.join(found)}")
    assert not bad, "parameters described outside a NumPy Parameters section:\n" + "\n".join(bad)


def documented():
    """{(page, object name): [parameter names]} for the objects whose docstrings have a Parameters
    section and whose module has an API page."""
    pages = {}
    for md in sorted((ROOT / "docs" / "api").glob("*.md")):
        for module in re.findall(r"^::: (hpcnn[\w.]*)", md.read_text(encoding="utf-8"), re.M):
            pages[module] = md.stem
    out = {}
    for path, name, names, doc in public_objects():
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
        body = section(doc, "Parameters")
        if module in pages and body:
            out[(pages[module], name)] = re.findall(r"^(\w+) :", body, re.M)
    return out


def test_the_documented_objects_include_the_ones_a_newcomer_meets_first():
    names = {name for _, name in documented()}
    assert {"HDF5Dataset", "load_data", "MirroredStrategy", "CommunicationOptions"} <= names, names


# ---------------------------------------------------------------------- the built site
def mkdocs():
    for candidate in (os.environ.get("HPCNN_MKDOCS"), shutil.which("mkdocs"), ROOT / "build" / "docs-venv" / "bin" / "mkdocs"):
        if candidate and Path(candidate).is_file():
            return str(candidate)
    return None


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    given = os.environ.get("HPCNN_DOCS_SITE")
    if given:
        return Path(given).resolve()  # .ci/run gives it relative to the clone; the browser needs file:// URIs
    tool = mkdocs()
    if tool is None:
        pytest.skip(NO_MKDOCS)
    out = tmp_path_factory.mktemp("site")
    r = subprocess.run([tool, "build", "--strict", "-q", "-d", str(out)], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return out


class Paragraphs(html.parser.HTMLParser):
    """The text of each <p>, and whether it sits in a parameter's own description."""

    def __init__(self):
        super().__init__()
        self.stack, self.paragraphs, self.text = [], [], None

    def handle_starttag(self, tag, attrs):
        self.stack.append((tag, dict(attrs).get("class") or ""))
        if tag == "p":
            self.text = []

    def handle_endtag(self, tag):
        while self.stack:
            t, _ = self.stack.pop()
            if t == tag:
                break
        if tag == "p" and self.text is not None:
            inside = any("doc-md-description" in c for _, c in self.stack)
            self.paragraphs.append(("".join(self.text), inside))
            self.text = None

    def handle_data(self, data):
        if self.text is not None:
            self.text.append(data)


def api_page(site, stem):
    return (site / "api" / stem / "index.html").read_text(encoding="utf-8")


def test_no_api_page_shows_a_section_as_text(site):
    """A NumPy section read with the wrong style shows as 'Parameters ---------- path : str ...'."""
    bad = []
    for page in sorted((site / "api").rglob("index.html")):
        parser = Paragraphs()
        parser.feed(page.read_text(encoding="utf-8"))
        bad += [f"{page.parent.name}: {text[:120]!r}" for text, _ in parser.paragraphs
                if re.search(r"\b(Parameters|Returns|Raises)\s*\n\s*-{3,}", text)]
    assert not bad, "sections rendered as paragraphs:\n" + "\n".join(bad)


def test_parameters_render_as_a_list(site):
    """Every parameter of a Parameters section is an item of the rendered list (its name in bold
    code), and no paragraph outside the descriptions runs 'name : type' entries together."""
    missing, run_together = [], []
    for (stem, name), names in sorted(documented().items()):
        page = api_page(site, stem)
        missing += [f"{stem}: {name}({n})" for n in names if f"<b><code>{n}</code></b>" not in page]
    for stem in sorted({stem for stem, _ in documented()}):
        parser = Paragraphs()
        parser.feed(api_page(site, stem))
        run_together += [f"{stem}: {text[:120]!r}" for text, inside in parser.paragraphs
                         if not inside and len(re.findall(r"(?:^|\n)\s*\w+ : \w", text)) >= 2]
    assert not missing, "parameters not rendered as list items:\n" + "\n".join(missing)
    assert not run_together, "parameters run together in a paragraph:\n" + "\n".join(run_together)


def test_the_site_links_the_width_fix(site):
    css = (ROOT / "docs" / "css" / "extra.css").read_text(encoding="utf-8")
    assert re.search(r"\.wy-nav-content\s*\{[^}]*max-width:\s*none", css)
    assert 'href="../css/extra.css"' in (site / "install" / "index.html").read_text(encoding="utf-8")


WIDTH_CHECK = """() => {
  const column = document.querySelector('.wy-nav-content').getBoundingClientRect().right;
  const out = [];
  for (const el of document.querySelectorAll('.rst-content table, .rst-content pre')) {
    // Cut: sticking out of the text column, or wider than what shows of it (a block that scrolls:
    // the theme's tables were, showing their first columns only), or in a wrapper that scrolls.
    const wrapper = el.parentElement.classList.contains('wy-table-responsive') ? el.parentElement : el;
    const wide = Math.max(el.scrollWidth - el.clientWidth, wrapper.scrollWidth - wrapper.clientWidth);
    if (el.getBoundingClientRect().right > column + 1 || wide > 1)
      out.push(el.tagName + ': ' + el.textContent.trim().slice(0, 50).replace(/\\s+/g, ' ') +
               ' (' + wide + ' px more than shows)');
  }
  return out;
}"""


def test_wide_tables_and_code_are_not_cut_at_1280_px(site):
    sync_api = pytest.importorskip("playwright.sync_api", reason='the width check needs Playwright (`pip install '
                                   '--no-build-isolation ".[browser]"`) and `apt-get install chromium`')
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("the width check needs `apt-get install chromium`")
    cut = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            for html_file in sorted(site.rglob("index.html")):
                if html_file.parent.name == "search":
                    continue
                page.goto(html_file.as_uri())
                cut += [f"{html_file.parent.relative_to(site)}: {c}" for c in page.evaluate(WIDTH_CHECK)]
        finally:
            browser.close()
    assert not cut, "cut at 1280 px:\n" + "\n".join(cut)


def test_readme_says_how_to_install_the_docs_tools():
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split("## Documentation", 1)[1].split())
    assert 'pip install --no-build-isolation ".[docs]"' in readme
    assert "docs" in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "site/" in (ROOT / ".gitignore").read_text().splitlines()
