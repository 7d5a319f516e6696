"""The include rule of csrc/ (csrc/README.md): each folder may include only the folders below it.

    core -> nothing else; ops -> core; nn -> ops, core; data -> core;
    diagnostics -> ops, core; distribute -> nn, ops, core; bindings -> all

Scans the #include lines of every source under csrc/ (no compiler needed): a file that includes a
folder it may not, a header that does not exist, a folder without a rule, or pybind11 outside
bindings/ fails the test."""
import pathlib
import re
from tests.support import paths

CSRC = paths.ROOT / "csrc"

ALLOWED = {
    "core": {"core"},
    "ops": {"ops", "core"},
    "nn": {"nn", "ops", "core"},
    "data": {"data", "core"},
    "diagnostics": {"diagnostics", "ops", "core"},
    "distribute": {"distribute", "nn", "ops", "core"},
    "bindings": {"bindings", "diagnostics", "distribute", "nn", "data", "ops", "core"},
}
SOURCE_SUFFIXES = {".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh"}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def include_problems(root: pathlib.Path) -> list:
    """Every breach of the rule under `root` (a csrc/ tree), as 'file:line: what' strings."""
    problems = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        if folder.name not in ALLOWED:
            problems.append(f"{folder.name}/: a folder without an include rule (add it to csrc/README.md and "
                            f"tests/rules/test_include_rules.py)")
    for path in sorted(root.rglob("*")):
        if path.suffix not in SOURCE_SUFFIXES or not path.is_file():
            continue
        rel = path.relative_to(root)
        if len(rel.parts) < 2:
            problems.append(f"{rel}: sources belong in a folder of csrc/")
            continue
        folder = rel.parts[0]
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            bracket, target = m.groups()
            where = f"{rel}:{n}"
            if bracket == "<":
                if target.startswith("pybind11/") and folder != "bindings":
                    problems.append(f"{where}: includes <{target}>: only bindings/ may use pybind11")
                continue
            parts = pathlib.PurePosixPath(target).parts
            if len(parts) < 2:
                problems.append(f'{where}: "{target}": name project headers from csrc/ ("folder/file.h")')
                continue
            if not (root / target).is_file():
                problems.append(f'{where}: "{target}" does not exist under csrc/')
            if folder in ALLOWED and parts[0] not in ALLOWED[folder]:
                problems.append(f'{where}: {folder}/ may not include "{target}" '
                                f"({folder}/ may include {', '.join(sorted(ALLOWED[folder]))})")
    return problems


def test_csrc_follows_the_include_rule():
    problems = include_problems(CSRC)
    assert not problems, "\n".join(problems)


def test_csrc_readme_describes_every_folder():
    readme = (CSRC / "README.md").read_text()
    for folder in sorted(p.name for p in CSRC.iterdir() if p.is_dir()):
        assert f"{folder}/" in readme, f"csrc/README.md does not describe {folder}/"


def write(root: pathlib.Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def test_the_checker_finds_each_kind_of_breach(tmp_path):
    write(tmp_path, "core/tensor.h", "#pragma once\n")
    write(tmp_path, "ops/conv2d.h", '#pragma once\n#include "core/tensor.h"\n')
    write(tmp_path, "nn/layer.h", '#include "ops/conv2d.h"\n#include "core/tensor.h"\n#include <vector>\n')
    assert include_problems(tmp_path) == []

    write(tmp_path, "core/bad.cpp", '#include "core/tensor.h"\n  # include "ops/conv2d.h"\n')
    write(tmp_path, "data/bad.cpp", '#include "nn/layer.h"\n#include "data/missing.h"\n#include "tensor.h"\n')
    write(tmp_path, "ops/py.cpp", "#include <pybind11/pybind11.h>\n")
    write(tmp_path, "extra/x.cpp", '#include "core/tensor.h"\n')
    write(tmp_path, "loose.cpp", "\n")
    problems = "\n".join(include_problems(tmp_path))
    assert 'core/bad.cpp:2: core/ may not include "ops/conv2d.h"' in problems
    assert 'data/bad.cpp:1: data/ may not include "nn/layer.h"' in problems
    assert '"data/missing.h" does not exist' in problems
    assert 'data/bad.cpp:3: "tensor.h": name project headers from csrc/' in problems
    assert "ops/py.cpp:1: includes <pybind11/pybind11.h>: only bindings/ may use pybind11" in problems
    assert "extra/: a folder without an include rule" in problems
    assert "loose.cpp: sources belong in a folder of csrc/" in problems
    assert "core/bad.cpp:1" not in problems

