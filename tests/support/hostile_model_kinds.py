"""The registry of the hostile model-file corpus (tests/support/hostile_models.py runs it,
tests/hostile/test_hostile_models.py drives it in CI): families of files and the kinds of damage done to
them, each registered by a small module listed in CASE_MODULES.

A **family** is a kind of file and the loader that reads it: its valid base files (built once
per worker, the same bytes on every run) and what loading one must give. A **kind** turns the base
files of its family into a case: (rng, bases) -> Case, a pure function of the rng (it picks a
base). Case i of seed s is kind CYCLE[i % len(CYCLE)] (each kind appears `share` times per cycle) with
``np.random.default_rng([s, i])``.

To add a family (the .h5 model and weight files, say): write tests/hostile_<name>_cases.py that
calls ``family(...)`` once and decorates each kind with ``@kind(name, family, share)``, and add
the module's name to CASE_MODULES. The runner, the judge and the CI test need no change; the
counts per kind in docs/reliability.md do (``python -m tests.support.hostile_models --counts N``).
"""
from __future__ import annotations

import dataclasses
import importlib
from typing import Any, Callable, Dict, List, Optional

# The modules that register families and kinds, imported in this order (the cycle's order).
CASE_MODULES = ["tests.support.hostile_keras_cases"]


@dataclasses.dataclass
class Base:
    """A valid file of a family: its bytes, and what loading it must give (the family's `same`
    compares a loaded result with it)."""
    name: str
    data: bytes
    expected: Any


@dataclasses.dataclass
class Case:
    """One hostile file. `must_refuse`: loading must raise (code, a custom object, a limit passed);
    `must_load`: loading must give the base's result (a valid variant); neither: either a clean
    refusal or the right result. `changes_model`: a loaded model may differ from the base in what
    the damage changed (a config value), so only what must survive it is compared."""
    data: bytes
    desc: str
    must_refuse: bool = False
    must_load: bool = False
    changes_model: bool = False


@dataclasses.dataclass
class Family:
    name: str
    suffix: str                                 # the case file's name ending
    bases: Callable[[], List[Base]]             # the valid files (called once per worker)
    load: Callable[[str], Any]                  # path -> the loaded result (raises to refuse)
    same: Callable[[Any, Base, Case], Optional[str]]  # None: the right result; else why not
    names_file: Callable[[str, str], bool]      # (message, path): does a refusal name the file?


@dataclasses.dataclass
class Kind:
    name: str
    family: str
    share: int
    make: Callable[[Any, List[Base]], Case]  # (rng, the family's bases) -> a case


FAMILIES: Dict[str, Family] = {}
KINDS: Dict[str, Kind] = {}


def family(f: Family) -> Family:
    assert f.name not in FAMILIES, f.name
    FAMILIES[f.name] = f
    return f


def kind(name: str, family_name: str, share: int = 1) -> Callable[[Callable[[Any, List[Base]], Case]], Callable]:
    def register(make: Callable[[Any, List[Base]], Case]) -> Callable[[Any, List[Base]], Case]:
        assert name not in KINDS, name
        KINDS[name] = Kind(name, family_name, share, make)
        return make
    return register


def load_registry() -> List[Kind]:
    """Imports CASE_MODULES (once) and returns the cycle of kinds."""
    for module in CASE_MODULES:
        importlib.import_module(module)
    cycle = []
    for k in KINDS.values():
        assert k.family in FAMILIES, (k.name, k.family)
        cycle += [k] * k.share
    # Interleave: the kinds' shares spread over the cycle, so that a prefix of the cases covers every kind.
    order = sorted(range(len(cycle)), key=lambda i: (cycle[:i].count(cycle[i]), i))
    return [cycle[i] for i in order]
