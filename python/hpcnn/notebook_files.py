"""The notebooks hpcnn ships, found by a short name, and their parameters.

An installed hpcnn carries its notebooks in ``hpcnn/notebooks/`` (CMakeLists.txt installs them
beside the compiled module); a source checkout used with ``PYTHONPATH=python`` (or an editable
install) finds them in the repository's ``notebooks/`` folder. ``hpcnn notebook run 01`` names
one by its number (``01`` or ``1``), by the start of its name (``cifar10``, ``mnist``, ``resnet``:
the name after the number, or the whole file name), or by a path to any ``.ipynb``.

A notebook's settings live in its one code cell tagged ``parameters`` (papermill's convention):
plain assignments (``EPOCHS = 10``) that a run may replace by a cell placed right after it.
"""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Dict, List, Optional, Tuple

PACKAGE_DIR = Path(__file__).resolve().parent


class NotebookError(ValueError):
    """What a student gets wrong when naming or parametrising a notebook (a clear message, no traceback)."""


def notebooks_dir() -> Path:
    """Where the shipped notebooks are: ``hpcnn/notebooks/`` of an installed hpcnn, else the
    ``notebooks/`` folder of the source checkout this hpcnn runs from."""
    installed = PACKAGE_DIR / "notebooks"
    if installed.is_dir():
        return installed
    checkout = PACKAGE_DIR.parents[1]   # python/hpcnn -> the repository
    if (checkout / "notebooks").is_dir() and (checkout / "pyproject.toml").is_file():
        return checkout / "notebooks"
    raise NotebookError(f"no notebooks found: neither {installed} (an installed hpcnn) nor a source checkout's "
                        "notebooks/ folder exists; reinstall hpcnn (pip install --no-build-isolation \".[jupyter]\" in its clone)")


def shipped() -> List[Path]:
    """The shipped notebooks, in their numbered order."""
    return sorted(notebooks_dir().glob("*.ipynb"))


def _number_and_rest(stem: str) -> Tuple[Optional[int], str]:
    """'01_cifar10_cpu_vs_gpu' -> (1, 'cifar10_cpu_vs_gpu'); (None, stem) without a number."""
    m = re.match(r"(\d+)[_-]?(.*)$", stem)
    return (int(m.group(1)), m.group(2)) if m else (None, stem)


def resolve(name: str) -> Path:
    """The notebook `name` names: an existing path, or one shipped notebook by number or name prefix.
    Raises NotebookError, listing the shipped notebooks, when none (or several) match."""
    path = Path(name).expanduser()
    if path.is_file():
        return path
    if "/" in name:   # a path, not a name
        raise NotebookError(f"notebook not found: {name}\n{listing()}")
    key = name.lower()
    matches = []
    for p in shipped():
        number, rest = _number_and_rest(p.stem)
        if key.isdigit() and number is not None and int(key) == number:
            matches.append(p)
        elif not key.isdigit() and (p.name.lower() == key or p.stem.lower().startswith(key)
                                    or rest.lower().startswith(key)):
            matches.append(p)
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise NotebookError(f"'{name}' names several notebooks: {', '.join(p.name for p in matches)}; "
                            "give its number")
    raise NotebookError(f"no notebook '{name}'\n{listing()}")


def title(path: Path) -> str:
    """The notebook's first markdown heading (its title), or '' without one."""
    for cell in read_json(path).get("cells", []):
        if cell.get("cell_type") == "markdown":
            for line in _source(cell).splitlines():
                if line.startswith("#"):
                    return line.lstrip("#").strip()
    return ""


def read_json(path: Path) -> dict:
    """The notebook file as plain JSON (listing needs no nbformat)."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise NotebookError(f"cannot read notebook {path}: {e}") from None


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def parameters_cell_index(cells: list, path: Path) -> int:
    """The index of the one code cell tagged 'parameters'; NotebookError if there is not exactly one."""
    found = [i for i, c in enumerate(cells) if c.get("cell_type") == "code"
             and "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(found) != 1:
        raise NotebookError(f"{Path(path).name} has {len(found)} code cells tagged 'parameters' (one is needed to "
                            "set parameters: tag the cell holding the settings, View > Cell Toolbar > Tags in "
                            "Jupyter, or run it without -p)")
    return found[0]


def declared_parameters(source: str) -> Optional[Dict[str, str]]:
    """{name: value as written} for the plain assignments of a parameters cell, in order; None when
    the cell is not plain Python (IPython magics), so that nothing can be checked against it."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    out: Dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:   # EPOCHS: int = 10
            targets, value = [node.target], node.value
        else:
            continue
        for t in targets:
            if isinstance(t, ast.Name):
                out[t.id] = ast.get_source_segment(source, value) or ""
    return out


def parameters_of(path: Path) -> Dict[str, str]:
    """The parameters a notebook declares ({} without a parameters cell or with an unreadable one)."""
    cells = read_json(path).get("cells", [])
    try:
        i = parameters_cell_index(cells, path)
    except NotebookError:
        return {}
    return declared_parameters(_source(cells[i])) or {}


def listing() -> str:
    """The shipped notebooks, one a line: number, file, title, then its parameters."""
    try:
        folder, paths = notebooks_dir(), shipped()
    except NotebookError as e:
        return str(e)
    lines = [f"The notebooks hpcnn ships ({folder}):"]
    for p in paths:
        number = re.match(r"\d*", p.stem).group(0)   # as the file writes it: 01
        lines.append(f"  {number:>2}  {p.name:<32} {title(p)}")
        params = parameters_of(p)
        if params:
            lines.append("      parameters: " + ", ".join(f"{k}={v}" for k, v in params.items()))
    lines.append("Run one: hpcnn notebook run 01 [--epochs N] [--synthetic] [-p NAME=VALUE ...]; "
                 "copy one to work on: hpcnn notebook copy 01")
    return "\n".join(lines)


__all__ = ["NotebookError", "notebooks_dir", "shipped", "resolve", "title", "read_json", "parameters_cell_index",
           "declared_parameters", "parameters_of", "listing"]
