"""What the loaders' source may not contain (issue 26): nothing that reads a model, weights, a
checkpoint or a backup may reach ``eval``, ``exec``, ``pickle``, ``importlib`` or ``__import__``
(nor their relatives: ``marshal``, ``runpy``, ``shelve``, YAML, numpy's ``allow_pickle``) with a name
from a file. The simplest honest rule: those names do not appear in these modules at all, as any
identifier (a name, an attribute, an import, a keyword, a definition). Read with ``ast``, not grep:
a docstring or a message may say "pickle"; code may not.

And every JSON text they parse goes through formats/config_json.py's reader, which bounds its
length and nesting before Python's recursive parser sees it: ``json.loads`` / ``json.load`` appear
nowhere else, except on what ``json.dumps`` has just written (a round trip of an object in memory)."""
from __future__ import annotations

import ast
import pathlib
from typing import List

import pytest
from tests.support import paths

ROOT = paths.ROOT / "python" / "hpcnn"
# The loaders: every module that turns a file's contents into a model, weights, a checkpoint or a
# backup, and the model and layer classes that build themselves from a file's config.
LOADERS = sorted({*ROOT.glob("formats/*.py"), ROOT / "saving.py", *ROOT.glob("models/*.py"), *ROOT.glob("layers/*.py"),
                  ROOT / "callbacks" / "backup_and_restore.py", ROOT / "callbacks" / "model_checkpoint.py",
                  ROOT / "keras" / "models.py", ROOT / "data.py", ROOT / "convert.py"})
FORBIDDEN = {"eval", "exec", "execfile", "compile_command", "pickle", "cPickle", "_pickle", "dill", "cloudpickle",
             "joblib", "shelve", "marshal", "importlib", "__import__", "import_module", "exec_module", "runpy",
             "yaml", "allow_pickle", "Unpickler", "loads_pickle"}
JSON_READER = ROOT / "formats" / "config_json.py"


def identifiers(tree: ast.AST):
    """(line, identifier) for every identifier the code uses or defines."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            yield node.lineno, node.id
        elif isinstance(node, ast.Attribute):
            yield node.lineno, node.attr
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                for part in alias.name.split("."):
                    yield node.lineno, part
                if alias.asname:
                    yield node.lineno, alias.asname
            if isinstance(node, ast.ImportFrom) and node.module:
                for part in node.module.split("."):
                    yield node.lineno, part
        elif isinstance(node, ast.keyword) and node.arg:
            yield node.value.lineno, node.arg
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.lineno, node.name
        elif isinstance(node, ast.arg):
            yield node.lineno, node.arg


def forbidden_uses(source: str) -> List[str]:
    return [f"line {line}: {name}" for line, name in identifiers(ast.parse(source)) if name in FORBIDDEN]


def _is_json_dumps(node: ast.AST) -> bool:
    f = node.func if isinstance(node, ast.Call) else None
    return isinstance(f, ast.Attribute) and f.attr == "dumps" and isinstance(f.value, ast.Name) and f.value.id == "json"


def raw_json_parses(source: str) -> List[str]:
    """json.loads / json.load calls (not on json.dumps' output), JSONDecoder, and imports of them."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module == "json":
            out += [f"line {node.lineno}: from json import {a.name}" for a in node.names if a.name != "dumps"]
        elif isinstance(node, ast.Attribute) and node.attr in ("JSONDecoder", "raw_decode"):
            out.append(f"line {node.lineno}: {node.attr}")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("loads", "load")
              and isinstance(node.func.value, ast.Name) and node.func.value.id == "json"
              and not (node.args and _is_json_dumps(node.args[0]))):
            out.append(f"line {node.lineno}: json.{node.func.attr}")
    return out


@pytest.mark.parametrize("path", LOADERS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_loader_names_eval_exec_pickle_or_imports(path):
    bad = forbidden_uses(path.read_text())
    assert not bad, f"{path.relative_to(ROOT)} uses names a loader may not: {bad}"


@pytest.mark.parametrize("path", [p for p in LOADERS if p != JSON_READER], ids=lambda p: str(p.relative_to(ROOT)))
def test_loaders_parse_json_only_through_the_bounded_reader(path):
    bad = raw_json_parses(path.read_text())
    assert not bad, (f"{path.relative_to(ROOT)} parses JSON without formats/config_json.read_config_json "
                     f"(its length and depth limits): {bad}")


def test_the_loaders_are_found():
    names = {str(p.relative_to(ROOT)) for p in LOADERS}
    assert {"saving.py", "formats/keras_archive.py", "formats/keras_config.py", "formats/h5tree.py",
            "formats/backup_file.py", "formats/config_json.py", "models/model_serialization.py"} <= names
    assert all(p.exists() for p in LOADERS)


@pytest.mark.parametrize("source", [
    "eval(name)", "exec(code)", "import pickle", "from pickle import loads", "import importlib.util",
    "m = __import__(name)", "x = importlib.import_module(name)", "np.load(f, allow_pickle=True)",
    "import marshal as m", "from yaml import load", "def eval(): pass", "obj.exec_module(m)",
])
def test_the_rule_catches_each_form(source):
    assert forbidden_uses(source), source


@pytest.mark.parametrize("source, caught", [
    ("json.loads(text)", True), ("json.load(f)", True), ("from json import loads", True),
    ("json.JSONDecoder().decode(t)", True), ("json.loads(json.dumps(obj))", False), ("json.dumps(obj)", False),
    ("read_config_json(text, 'x')", False),
])
def test_the_json_rule_catches_each_form(source, caught):
    assert bool(raw_json_parses(source)) == caught, source
