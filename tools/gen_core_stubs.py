#!/usr/bin/env python3
"""Type stubs for the extension module hpcnn._core, written from the installed module itself.

    python tools/gen_core_stubs.py           # rewrite python/hpcnn/_core/*.pyi
    python tools/gen_core_stubs.py --check   # exit 1, naming what differs, when they are stale

Run it after changing csrc/bindings/ and installing this tree (`pip install .`, see docs/architecture.md,
"Developer notes"); tests/rules/test_core_stubs.py fails until the stubs match the module again.

How: walk the module by runtime introspection (functions, classes with their methods and
properties, submodules) and take each signature from the first line(s) of the docstring that
pybind11 writes for every function it binds (`name(arg: type = default, ...) -> type`, or
"Overloaded function." followed by one numbered signature per overload). Each signature is parsed
with `ast`, so what lands in a stub is valid Python: a C++ type that leaked into a signature (a
class bound after the function that returns it) becomes the Python class of the same name, or
typing.Any with a warning.

The stubs form a package, `hpcnn/_core/__init__.pyi` plus one `.pyi` per submodule
(`ops.pyi`, `data.pyi`), because a single `_core.pyi` cannot declare `hpcnn._core.ops`. At run time
the compiled `_core.*.so` beside that folder still wins the import (a folder without `__init__.py`
is only a namespace package, which comes last).
"""
from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import re
import sys
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy

MODULE = "hpcnn._core"
STUB_DIR = Path(__file__).resolve().parent.parent / "python" / "hpcnn" / "_core"
REGENERATE = "python tools/gen_core_stubs.py"
HEADER = (f"# Generated from the installed {MODULE} by tools/gen_core_stubs.py: do not edit by hand.\n"
          f"# After changing csrc/bindings/ and reinstalling, regenerate with: {REGENERATE}\n")

# Class attributes pybind11 (or Python) adds to every bound class: not part of the API.
_CLASS_NOISE = {"__dict__", "__doc__", "__module__", "__weakref__", "_pybind11_conduit_v1_"}
# C++ names that leak into pybind11 signatures, e.g. "hpcnn::bindings::(anonymous namespace)::EpochIterator".
_CPP_NAME = re.compile(r"(?:\w+|\(anonymous namespace\))(?:::(?:\w+|\(anonymous namespace\)))+")
# Defaults pybind11 cannot print: "<hpcnn._core.Thing object at 0x7f...>".
_OPAQUE_DEFAULT = re.compile(r"=\s*<[^<>]*>")


def _warn(msg: str) -> None:
    print(f"gen_core_stubs: warning: {msg}", file=sys.stderr)


class _Context:
    """What a stub file being written needs to know: its module, the classes of the whole
    extension (to resolve leaked C++ names) and the modules its annotations import."""

    def __init__(self, module_name: str, classes: Dict[str, str]):
        self.module_name = module_name
        self.classes = classes  # simple name -> dotted Python name, every class in hpcnn._core
        self.imports: set = set()


def _all_classes(module, out: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    out = {} if out is None else out
    for name, obj in vars(module).items():
        if inspect.isclass(obj) and obj.__module__ == module.__name__:
            out.setdefault(name, f"{module.__name__}.{name}")
        elif _is_submodule(module, obj):
            _all_classes(obj, out)
    return out


def _is_submodule(parent, obj) -> bool:
    return inspect.ismodule(obj) and obj.__name__.startswith(parent.__name__ + ".")


def _split_doc(name: str, doc: Optional[str]) -> List[Tuple[str, str]]:
    """pybind11's docstring -> [(signature line, prose)], one per overload."""
    doc = doc or ""
    lines = doc.splitlines()
    if lines and lines[0].strip() == "Overloaded function.":
        out: List[Tuple[str, str]] = []
        for line in lines[1:]:
            m = re.match(r"^\d+\. (" + re.escape(name) + r"\(.*)$", line)
            if m:
                out.append((m.group(1), ""))
            elif out:
                out[-1] = (out[-1][0], (out[-1][1] + "\n" + line))
        return [(sig, prose.strip()) for sig, prose in out]
    if lines and (lines[0].startswith(name + "(") or lines[0].startswith("(")):
        sig = lines[0] if lines[0].startswith(name + "(") else name + lines[0]
        return [(sig, "\n".join(lines[1:]).strip())]
    return []


def _dotted(node: ast.AST) -> Optional[str]:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _import_prefix(dotted: str) -> Optional[str]:
    """The longest importable module at the start of a dotted name ('collections.abc.Sequence' ->
    'collections.abc')."""
    parts = dotted.split(".")
    for n in range(len(parts) - 1, 0, -1):
        candidate = ".".join(parts[:n])
        try:
            importlib.import_module(candidate)
            return candidate
        except ImportError:
            continue
    return None


class _Annotations(ast.NodeTransformer):
    """Rewrites annotations for the stub file: names of the file's own module become bare names,
    and every other module a dotted name starts with is recorded for an import."""

    def __init__(self, ctx: _Context):
        self.ctx = ctx

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        dotted = _dotted(node)
        if dotted is None:
            return self.generic_visit(node)
        prefix = self.ctx.module_name + "."
        if dotted.startswith(prefix) and "." not in dotted[len(prefix):]:
            return ast.copy_location(ast.Name(id=dotted[len(prefix):], ctx=ast.Load()), node)
        module = _import_prefix(dotted)
        if module is not None:
            self.ctx.imports.add(module)
        return node


def _function(name: str, sig_line: str, prose: str, ctx: _Context, method: bool) -> ast.FunctionDef:
    """One `def` from one pybind11 signature line."""
    text = sig_line

    def cpp_to_python(m: re.Match) -> str:
        simple = m.group(0).split("::")[-1]
        if simple in ctx.classes:
            return ctx.classes[simple]
        _warn(f"{ctx.module_name}.{name}: C++ type {m.group(0)!r} has no Python class; typed as typing.Any")
        return "typing.Any"

    text = _CPP_NAME.sub(cpp_to_python, text)
    text = _OPAQUE_DEFAULT.sub("= ...", text)
    try:
        fn = ast.parse(f"def {text}: ...").body[0]
    except SyntaxError as e:
        _warn(f"{ctx.module_name}.{name}: cannot parse signature {sig_line!r} ({e.msg}); typed as (*args, **kwargs)")
        fn = ast.parse(f"def {name}(*args: typing.Any, **kwargs: typing.Any) -> typing.Any: ...").body[0]
    assert isinstance(fn, ast.FunctionDef)
    if method:  # "self: hpcnn._core.Model" / "arg0: ...": the stub's `self`, unannotated
        params = fn.args.posonlyargs or fn.args.args
        if params:
            params[0].arg = "self"
            params[0].annotation = None
    # Literal defaults stay (they document the call); anything else becomes `...`, as in typeshed.
    args = fn.args
    args.defaults = [_default(d) for d in args.defaults]
    args.kw_defaults = [None if d is None else _default(d) for d in args.kw_defaults]
    fn = _Annotations(ctx).visit(fn)
    if fn.returns is None:
        fn.returns = ast.Name(id="None", ctx=ast.Load())
    fn.body = [ast.Expr(ast.Constant(value=prose))] if prose else [ast.Expr(ast.Constant(value=...))]
    return fn


def _default(node: ast.expr) -> ast.expr:
    try:
        value = ast.literal_eval(node)
    except ValueError:
        return ast.Constant(value=...)
    if isinstance(value, float) and float(numpy.float32(value)) == value:
        # A C++ float default printed as a double (0.0010000000474974513): the float's own digits.
        return ast.Constant(value=float(str(numpy.float32(value))))
    return node


def _functions(name: str, obj, ctx: _Context, method: bool) -> List[ast.FunctionDef]:
    """All overloads of one function or method, @typing.overload-decorated where more than one."""
    doc = getattr(obj, "__doc__", None)
    overloads = _split_doc(name, doc)
    if not overloads:
        _warn(f"{ctx.module_name}.{name}: no pybind11 signature in its docstring; typed as (*args, **kwargs)")
        sig = f"{name}(self, *args: typing.Any, **kwargs: typing.Any) -> typing.Any" if method else \
              f"{name}(*args: typing.Any, **kwargs: typing.Any) -> typing.Any"
        overloads = [(sig, (doc or "").strip())]
    defs = [_function(name, sig, prose, ctx, method) for sig, prose in overloads]
    if len(defs) > 1:
        ctx.imports.add("typing")
        for d in defs:
            d.decorator_list = [ast.parse("typing.overload", mode="eval").body]
    return defs


def _property(name: str, prop: property, ctx: _Context) -> List[ast.FunctionDef]:
    getter = _functions(name, prop.fget, ctx, method=True)[0]
    getter.decorator_list = [ast.Name(id="property", ctx=ast.Load())]
    out = [getter]
    if prop.fset is not None:
        setter = _functions(name, prop.fset, ctx, method=True)[0]
        setter.decorator_list = [ast.parse(f"{name}.setter", mode="eval").body]
        setter.returns = ast.Name(id="None", ctx=ast.Load())
        setter.body = [ast.Expr(ast.Constant(value=...))]
        out.append(setter)
    return out


def _attribute(name: str, value, ctx: _Context) -> ast.AnnAssign:
    kind = type(value)
    annotation = kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    node = ast.parse(f"{name}: {annotation}").body[0]
    assert isinstance(node, ast.AnnAssign)
    return _Annotations(ctx).visit(node)


def _class(name: str, cls: type, ctx: _Context) -> ast.ClassDef:
    body: List[ast.stmt] = []
    doc = (cls.__doc__ or "").strip()
    if doc:
        body.append(ast.Expr(ast.Constant(value=doc)))
    for member, raw in sorted(vars(cls).items()):
        if member in _CLASS_NOISE or (member.startswith("_") and not member.startswith("__")):
            continue
        if isinstance(raw, property):
            body.extend(_property(member, raw, ctx))
        elif isinstance(raw, staticmethod):
            for d in _functions(member, raw.__func__, ctx, method=False):
                d.decorator_list.insert(0, ast.Name(id="staticmethod", ctx=ast.Load()))
                body.append(d)
        elif inspect.isclass(raw):
            body.append(_class(member, raw, ctx))
        elif callable(raw):
            if not _split_doc(member, getattr(raw, "__doc__", None)) and member.startswith("__"):
                continue  # a slot wrapper pybind11's base class provides (e.g. the no-constructor __init__)
            body.extend(_functions(member, getattr(cls, member), ctx, method=True))
        elif not member.startswith("__"):
            body.append(_attribute(member, raw, ctx))
    if not body:
        body = [ast.Expr(ast.Constant(value=...))]
    node = ast.ClassDef(name=name, bases=[], keywords=[], body=body, decorator_list=[])
    if sys.version_info >= (3, 12):
        node.type_params = []
    return node


def _module_stub(module, classes: Dict[str, str]) -> str:
    ctx = _Context(module.__name__, classes)
    submodules, class_defs, functions, attributes = [], [], [], []
    for name, obj in sorted(vars(module).items()):
        if name.startswith("_"):
            continue
        if _is_submodule(module, obj):
            submodules.append(name)
        elif inspect.isclass(obj):
            class_defs.append(_class(name, obj, ctx))
        elif callable(obj):
            functions.extend(_functions(name, obj, ctx, method=False))
        elif not inspect.ismodule(obj):
            attributes.append(_attribute(name, obj, ctx))
    body: List[ast.stmt] = []
    doc = (module.__doc__ or "").strip()
    if doc:
        body.append(ast.Expr(ast.Constant(value=doc)))
    body += [ast.Import(names=[ast.alias(name=m)]) for m in sorted(ctx.imports)]
    body += [ast.ImportFrom(module=None, names=[ast.alias(name=s, asname=s)], level=1) for s in submodules]
    body += attributes + class_defs + functions
    text = ast.unparse(ast.fix_missing_locations(ast.Module(body=body, type_ignores=[])))
    return HEADER + text + "\n"


def generate(module=None) -> Dict[str, str]:
    """{file name under python/hpcnn/_core/: text} for the installed module (or the one given)."""
    module = module or importlib.import_module(MODULE)
    classes = _all_classes(module)
    files = {"__init__.pyi": _module_stub(module, classes)}
    for name, obj in sorted(vars(module).items()):
        if _is_submodule(module, obj) and not name.startswith("_"):
            if any(_is_submodule(obj, o) for o in vars(obj).values()):
                raise NotImplementedError(f"{obj.__name__} has submodules of its own: extend gen_core_stubs.py")
            files[f"{name}.pyi"] = _module_stub(obj, classes)
    return files


# ---------------------------------------------------------------- comparing stubs with the module
def surface(text: str, prefix: str = "") -> Dict[str, str]:
    """What a stub file declares: {qualified name: signature(s), 'class', 'module' or 'attr: type'}.
    Docstrings and formatting are left out, so only the API is compared."""
    out: Dict[str, str] = {}

    def walk(body: List[ast.stmt], qual: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                out[qual + node.name] = "class"
                walk(node.body, f"{qual}{node.name}.")
            elif isinstance(node, ast.FunctionDef):
                kind = ""
                decorators = [ast.unparse(d) for d in node.decorator_list]
                if "property" in decorators:
                    kind = "property "
                elif any(d.endswith(".setter") for d in decorators):
                    out[qual + node.name] += " (settable)"
                    continue
                elif "staticmethod" in decorators:
                    kind = "staticmethod "
                sig = f"{kind}({ast.unparse(node.args)}) -> {ast.unparse(node.returns) if node.returns else '?'}"
                key = qual + node.name
                out[key] = f"{out[key]} | {sig}" if key in out else sig
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                out[qual + node.target.id] = f"attr: {ast.unparse(node.annotation)}"
            elif isinstance(node, ast.ImportFrom) and node.level == 1:
                for alias in node.names:
                    out[qual + (alias.asname or alias.name)] = "module"

    walk(ast.parse(text).body, prefix)
    return out


def differences(expected: Dict[str, str], actual: Dict[str, str]) -> List[str]:
    """Human-readable differences between the stubs of the module (expected) and the files (actual)."""
    problems: List[str] = []
    for f in sorted(set(expected) - set(actual)):
        problems.append(f"missing stub file python/hpcnn/_core/{f}")
    for f in sorted(set(actual) - set(expected)):
        problems.append(f"stub file python/hpcnn/_core/{f} has no module in {MODULE}")
    want: Dict[str, str] = {}
    have: Dict[str, str] = {}
    for f in expected:
        want.update(surface(expected[f], _prefix(f)))
    for f in actual:
        have.update(surface(actual[f], _prefix(f)))
    for name in sorted(set(want) - set(have)):
        problems.append(f"in the module, not in the stubs: {name} {want[name]}")
    for name in sorted(set(have) - set(want)):
        problems.append(f"in the stubs, not in the module: {name} {have[name]}")
    for name in sorted(set(want) & set(have)):
        if want[name] != have[name]:
            problems.append(f"{name}: the module has {want[name]}, the stub says {have[name]}")
    return problems


def _prefix(file_name: str) -> str:
    stem = file_name[: -len(".pyi")]
    return "" if stem == "__init__" else stem + "."


def read_stubs(directory: Path = STUB_DIR) -> Dict[str, str]:
    return {p.name: p.read_text() for p in sorted(directory.glob("*.pyi"))}


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare, do not write; exit 1 when stale")
    ap.add_argument("--out", type=Path, default=STUB_DIR, help=f"folder of the stubs (default {STUB_DIR})")
    a = ap.parse_args(argv)
    files = generate()
    if a.check:
        problems = differences(files, read_stubs(a.out))
        if problems:
            print("\n".join(problems + [f"regenerate the stubs with: {REGENERATE}"]))
            return 1
        print(f"stubs match {MODULE}")
        return 0
    a.out.mkdir(parents=True, exist_ok=True)
    for stale in set(read_stubs(a.out)) - set(files):
        (a.out / stale).unlink()
    for name, text in files.items():
        (a.out / name).write_text(text)
    print(f"wrote {', '.join(sorted(files))} in {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
