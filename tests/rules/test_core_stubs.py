"""The type stubs of hpcnn._core (python/hpcnn/_core/*.pyi) against the module that is installed:
every public name on both sides, the same signatures, annotations that resolve, and the files in
the installed package. When the bindings change, regenerate the stubs (the failure says how)."""
import ast
import builtins
import importlib.util
import inspect
from pathlib import Path

import pytest

import hpcnn
from hpcnn import _core
from tests.support import paths

REPO = paths.ROOT
GENERATOR = REPO / "tools" / "gen_core_stubs.py"


@pytest.fixture(scope="module")
def gen():
    spec = importlib.util.spec_from_file_location("gen_core_stubs", GENERATOR)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_stubs_match_the_module(gen):
    problems = gen.differences(gen.generate(), gen.read_stubs())
    assert not problems, (
        "python/hpcnn/_core/*.pyi do not match the installed hpcnn._core:\n  " + "\n  ".join(problems) +
        f"\nAfter changing csrc/bindings/ and reinstalling (pip install --no-build-isolation . in the clone), regenerate the stubs with:\n"
        f"  {gen.REGENERATE}")


def test_every_public_name_of_the_module_is_in_a_stub(gen):
    """The same check spelled out on the live module, independent of how the generator walks it."""
    have = {}
    for name, text in gen.read_stubs().items():
        have.update(gen.surface(text, gen._prefix(name)))
    modules = {"": _core}
    modules.update({name + ".": obj for name, obj in vars(_core).items() if inspect.ismodule(obj)})
    assert {"ops.", "data."} <= set(modules)
    for prefix, module in modules.items():
        for name, obj in vars(module).items():
            if name.startswith("_"):
                continue
            assert prefix + name in have, f"{module.__name__}.{name} is not in the stubs; run {gen.REGENERATE}"
            if isinstance(obj, type):
                for member in vars(obj):
                    if not member.startswith("_"):
                        assert f"{prefix}{name}.{member}" in have, f"{name}.{member}: run {gen.REGENERATE}"
    for qual in have:
        owner = _core
        for part in qual.split("."):
            assert hasattr(owner, part), f"the stubs declare {qual}, which {owner!r} has no more; run {gen.REGENERATE}"
            owner = getattr(owner, part)


def test_the_comparison_notices_drift(gen):
    """A stub that lost a function, changed a signature or kept a removed name is reported by name."""
    files = gen.generate()
    stale = dict(files)
    stale["__init__.pyi"] = (files["__init__.pyi"]
                             .replace("def get_num_threads() -> int:", "def get_thread_count() -> int:")
                             .replace("check_usable: bool=True", "check: bool=True"))
    stale["ops.pyi"] = files["ops.pyi"].replace("def relu_forward(", "def relu_fwd(")
    del stale["data.pyi"]
    problems = "\n".join(gen.differences(files, stale))
    for expected in ("in the module, not in the stubs: get_num_threads", "in the stubs, not in the module: get_thread_count",
                     "normalize_device: the module has", "in the module, not in the stubs: ops.relu_forward",
                     "in the stubs, not in the module: ops.relu_fwd", "missing stub file python/hpcnn/_core/data.pyi"):
        assert expected in problems, problems
    assert gen.differences(files, files) == []


def test_stub_annotations_resolve(gen):
    """Every name a stub uses is a builtin, defined in that stub, or imported there (no C++ type names)."""
    for file_name, text in gen.read_stubs().items():
        tree = ast.parse(text)
        defined = set(dir(builtins))
        imported_roots = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                defined.add(node.name)
            elif isinstance(node, ast.Import):
                imported_roots.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                defined.update(a.asname or a.name for a in node.names)
        for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
            annotations = [a.annotation for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs] + [fn.returns]
            annotations += [a.annotation for a in (fn.args.vararg, fn.args.kwarg) if a is not None]
            for annotation in filter(None, annotations):
                for node in ast.walk(annotation):
                    if isinstance(node, ast.Name):
                        assert node.id in defined | imported_roots, f"{file_name}: {fn.name} uses {node.id!r}"
                assert "::" not in ast.unparse(annotation), f"{file_name}: {fn.name}: C++ name in {ast.unparse(annotation)}"


def test_stubs_ship_with_the_installed_package(gen):
    """pip installs the stubs and the PEP 561 marker beside the extension, and the stub folder does
    not shadow the compiled module (hpcnn._core is still the .so)."""
    package = Path(hpcnn.__file__).parent
    assert Path(_core.__file__).suffix in (".so", ".pyd"), _core.__file__
    assert (package / "py.typed").is_file()
    stubs = gen.read_stubs()
    assert {"__init__.pyi", "ops.pyi", "data.pyi"} <= set(stubs)
    for name, text in stubs.items():
        installed = package / "_core" / name
        assert installed.is_file(), f"{installed} is not installed"
        assert installed.read_text() == text, f"{installed} differs from this tree's: reinstall (pip install --no-build-isolation . in the clone)"
