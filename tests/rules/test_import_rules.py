"""The Python package's house rules, held as tests/rules/test_include_rules.py holds csrc's: read from
the sources with ``ast``, nothing imported. docs/architecture.md quotes FLOORS below (a test here
checks the quote).

- Floors: each top-level module or package of hpcnn sits on a floor and imports only from lower
  floors (a package's own modules import each other freely, but without a circle).
- No import circle anywhere in python/hpcnn.
- No import of hpcnn placed inside a function, a class or a try block to get round a circle (the
  CLI may import lazily, for start-up time).
- No module reads another module's ``_private`` names: ``from x import _name``, or ``obj._name`` on
  an object that is not ``self``/``cls`` where this module defines no ``_name`` itself.
- No module longer than MAX_LINES.
- The loops in training/ call a callback hook once, on their ``CallbackList`` (callbacks/callback_list.py),
  never in a loop over the callbacks, and import no concrete callback but History.
"""
from __future__ import annotations

import ast
import pathlib
from typing import Dict, List, Set, Tuple

import pytest
from tests.support import paths

ROOT = paths.ROOT / "python" / "hpcnn"
MAX_LINES = 500

# Lowest first. A unit is hpcnn's top-level module or package ("layers" holds hpcnn.layers.*); the
# package face ("hpcnn") sits above what it gathers, the tools the CLI runs above the face.
FLOORS: List[List[str]] = [
    ["_core", "blas_env"],                                                      # the C++ module; its BLAS's kernels
    ["aliases", "errors", "validation", "progress", "interrupts", "suggestions", "config_objects"],
    ["paths"],                                                                  # where files are looked for
    ["image_folders"],                                                          # folders of image files, decoded
    ["utils", "devices", "threads", "data", "image_files"],                     # runtime, data
    ["config", "datasets", "distribute", "losses", "metrics", "optimizers", "regularizers"],
    ["layers"],                                                                 # the symbolic graph at its bottom
    ["formats"],                                                                # file layouts: never a model class
    ["export"],                                                                 # ONNX and OpenVINO graphs of a model
    ["callbacks"],
    ["training"],
    ["models"],
    ["saving", "applications"],                                                 # builds models from files; prebuilt ones
    ["keras"],                                                                  # Keras' names
    ["hpcnn"],                                                                  # the package face
    ["bench_workers"],                                                          # bench's timed side
    ["run_records", "tutorial_data", "plot", "notebook_files"],                 # what the CLI verbs share
    ["bench", "convert", "notebook_run", "tutorial", "dist_train", "export_command"],  # the verbs: siblings
    ["cli"],
    ["__main__"],
]
FLOOR = {unit: i for i, units in enumerate(FLOORS) for unit in units}

# Modules that may import hpcnn lazily: the CLI, for start-up time (`hpcnn --help` loads no model
# code), and bench_workers.py, which runs as a file on its own in a worker process, also against
# another hpcnn (bench_train.py --baseline-python), and so imports that hpcnn, absolutely, when it runs.
LAZY_IMPORTS_ALLOWED = {"hpcnn.cli", "hpcnn.bench_workers"}

# Deliberate reads of another module's private names: (module, name, why).
PRIVATE_EXCEPTIONS = {
    ("hpcnn.bench_workers", "_model"): "bench_workers.py also times an older hpcnn (bench_train.py --baseline-python), whose model "
                               "had no public `core` yet",
}


def modules() -> Dict[str, pathlib.Path]:
    out = {}
    for p in sorted(ROOT.rglob("*.py")):
        parts = list(p.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


MODULES = modules()


def unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "hpcnn"


def target_of(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + (node.module.split(".") if node.module else []))


def imports(module: str) -> List[Tuple[ast.AST, str, List[str], bool]]:
    """(node, imported hpcnn module, names taken from it, at module level) for each import of hpcnn."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(), str(path))
    top_level = set(id(n) for n in tree.body)
    for n in tree.body:  # `if TYPE_CHECKING:` at module level counts as module level
        if isinstance(n, ast.If):
            top_level.update(id(m) for m in n.body)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            target = target_of(module, path.name == "__init__.py", node)
            if not target.startswith("hpcnn"):
                continue
            names = [a.name for a in node.names]
            for name in names:  # `from . import layers`: the module hpcnn.layers, not the package
                full = f"{target}.{name}"
                out.append((node, full if full in MODULES or full == "hpcnn._core" else target, [name],
                            id(node) in top_level))
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "hpcnn":
                    out.append((node, a.name, [], id(node) in top_level))
    return out


def test_every_unit_has_a_floor():
    units = {unit(m) for m in MODULES} | {"_core"}
    missing = sorted(units - set(FLOOR))
    assert not missing, f"python/hpcnn units without a floor in tests/rules/test_import_rules.py FLOORS: {missing}"
    stale = sorted(set(FLOOR) - units)
    assert not stale, f"FLOORS names units python/hpcnn does not have: {stale}"


def test_imports_point_down_the_floors():
    breaches = []
    for module in MODULES:
        mine = unit(module)
        for node, target, _, _ in imports(module):
            theirs = unit(target)
            if theirs != mine and FLOOR[theirs] >= FLOOR[mine]:
                breaches.append(f"{module} (floor {FLOOR[mine]}, {mine}) imports {target} (floor {FLOOR[theirs]}, "
                                f"{theirs}) at line {node.lineno}")
    assert not breaches, "imports that do not point down the floors:\n  " + "\n  ".join(breaches)


def test_no_import_circle():
    graph: Dict[str, Set[str]] = {m: set() for m in MODULES}
    for module in MODULES:
        for _, target, _, _ in imports(module):
            if target in MODULES and target != module:
                graph[module].add(target)
    # A package's __init__ is imported before any of its modules: a module importing its own package
    # face waits on it. Edges module -> own package are kept: a package face that imports the module
    # closes a real circle.
    state: Dict[str, int] = {}
    stack: List[str] = []
    circles: List[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                circles.append(" -> ".join(stack[stack.index(t):] + [t]))
            elif t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    assert not circles, "import circles:\n  " + "\n  ".join(circles)


def test_no_late_imports():
    late = [f"{module}:{node.lineno} imports {target} inside a function, class or try block"
            for module in MODULES if module not in LAZY_IMPORTS_ALLOWED
            for node, target, _, top in imports(module) if not top]
    assert not late, ("imports of hpcnn placed late (none to get round a circle; a name needed from a "
                      "higher floor belongs lower, or in hpcnn.aliases):\n  " + "\n  ".join(late))


def defined_private_names(tree: ast.AST) -> Set[str]:
    """The private names a module defines: functions, classes, assignments (module, class or
    self attributes), arguments."""
    names: Set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.split(".")[-1])
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def private_reads(module: str) -> List[str]:
    path = MODULES[module]
    tree = ast.parse(path.read_text(), str(path))
    own = defined_private_names(tree)
    found = []
    for node, target, names, _ in imports(module):
        for name in names:
            if name.startswith("_") and not name.startswith("__") and f"{target}.{name}" not in MODULES \
                    and name != "_core":
                found.append(f"{module}:{node.lineno} imports {name} from {target}")
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        name = node.attr
        if not name.startswith("_") or name.startswith("__") or name in own or name == "_core":
            continue
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            continue
        if (module, name) in PRIVATE_EXCEPTIONS:
            continue
        found.append(f"{module}:{node.lineno} reads .{name}, a private name it does not define")
    return found


def test_no_module_reads_another_modules_private_names():
    found = [line for module in MODULES for line in private_reads(module)]
    assert not found, ("reads of another module's private names (make what is needed elsewhere public, below):\n  "
                       + "\n  ".join(found))


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_is_at_most_max_lines(module):
    lines = MODULES[module].read_text().count("\n")
    assert lines <= MAX_LINES, (f"{MODULES[module].relative_to(ROOT.parent)} has {lines} lines (at most {MAX_LINES}: "
                                "one job per file; split it)")


def callback_hooks() -> Set[str]:
    """The method names of the base Callback (callbacks/base.py): its hooks."""
    tree = ast.parse((ROOT / "callbacks" / "base.py").read_text())
    base = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Callback")
    return {n.name for n in base.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")}


# What training/ may take from callbacks/: the base class, the list, fit's run record, History.
TRAINING_TAKES_FROM_CALLBACKS = {"Callback", "CallbackList", "FitRun", "History"}


def hook_loops(tree: ast.AST, hooks: Set[str]) -> List[int]:
    """Lines where a loop's (or comprehension's) variable has a callback hook called on it."""
    found = []
    for node in ast.walk(tree):
        targets: List[ast.AST] = []
        bodies: List[ast.AST] = []
        if isinstance(node, ast.For):
            targets, bodies = [node.target], list(node.body)
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            targets = [g.target for g in node.generators]
            bodies = [node]
        names = {t.id for t in targets if isinstance(t, ast.Name)}
        for body in bodies:
            for call in ast.walk(body):
                if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                        and isinstance(call.func.value, ast.Name) and call.func.value.id in names
                        and call.func.attr in hooks):
                    found.append(call.lineno)
    return found


def test_training_loops_call_the_callback_list():
    hooks = callback_hooks()
    assert {"on_epoch_begin", "on_train_batch_end", "restore_training"} <= hooks
    breaches = []
    for module in MODULES:
        if unit(module) != "training":
            continue
        tree = ast.parse(MODULES[module].read_text())
        breaches += [f"{module}:{line} calls a callback hook in a loop over callbacks (call the CallbackList)"
                     for line in hook_loops(tree, hooks)]
        for node, target, names, _ in imports(module):
            if unit(target) == "callbacks":
                breaches += [f"{module}:{node.lineno} imports {name} from {target}" for name in names
                             if name not in TRAINING_TAKES_FROM_CALLBACKS]
    assert not breaches, "training/ reaches past its CallbackList:\n  " + "\n  ".join(breaches)
    # The check sees a breach.
    assert hook_loops(ast.parse("for cb in cbs:\n    cb.on_epoch_end(0, {})\n"), hooks) == [2]
    assert hook_loops(ast.parse("[cb.restore_training(r) for cb in cbs]\n"), hooks) == [1]


def floors_source() -> str:
    """The FLOORS table as written above (its lines, from `FLOORS:` to the closing bracket)."""
    lines = pathlib.Path(__file__).read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("FLOORS: "))
    end = next(i for i in range(start, len(lines)) if lines[i] == "]")
    return "\n".join(lines[start:end + 1])


def test_architecture_doc_quotes_the_floors_table():
    """docs/architecture.md shows the floors by quoting this file's FLOORS, not by restating them:
    the indented block after its marker line is that table, line for line."""
    doc = (ROOT.parents[1] / "docs" / "architecture.md").read_text().splitlines()
    marker = "<!-- quoted from tests/rules/test_import_rules.py FLOORS: test_architecture_doc_quotes_the_floors_table -->"
    assert marker in doc, f"docs/architecture.md lacks the line {marker!r} above its quote of FLOORS"
    at = doc.index(marker) + 1
    while at < len(doc) and not doc[at].strip():
        at += 1
    quoted = []
    while at < len(doc) and doc[at].startswith("    "):
        quoted.append(doc[at][4:])
        at += 1
    assert "\n".join(quoted) == floors_source(), (
        "docs/architecture.md's quote of FLOORS differs from tests/rules/test_import_rules.py: copy the table "
        "(indented four spaces) below the marker line")


def test_the_rules_see_a_breach():
    """The checks find what they look for (a rule that can never fail holds nothing)."""
    sample = ast.parse("from .models import Model\nx = other._hidden\n")
    assert any(isinstance(n, ast.ImportFrom) and n.module == "models" for n in ast.walk(sample))
    assert "_hidden" not in defined_private_names(sample)
    assert FLOOR["models"] > FLOOR["layers"] > FLOOR["_core"]
