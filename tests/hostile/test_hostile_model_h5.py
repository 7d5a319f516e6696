"""Hostile `.h5` model and weights files: hundreds of damaged files, each refused with a clear
exception or loaded with exactly the right weights, and none of them making hpcnn open another file.

The cases come from tests/support/hostile_model_h5.py (a seeded generator: see its docstring for the
damage and the judging). They run in worker subprocesses, many cases per worker, two workers at a
time: a case that crashes or hangs takes down only its worker. The driver then names the case,
re-runs it alone to confirm, and carries on with the rest of that worker's cases in a new one.

    HPCNN_HOSTILE_H5_CASES=2000 HPCNN_HOSTILE_H5_SEED=7 python -m pytest -q tests/hostile/test_hostile_model_h5.py

runs more cases or another seed (CI runs the default: the cases of its row in tests/support/hostile_corpora.py, seed 26).
"""
from __future__ import annotations


import pytest

pytest.importorskip("h5py")
from tests.support import hostile_model_h5
from tests.support.hostile_corpora import CORPORA

CORPUS = CORPORA["model_h5"]  # its row: generator, cases, batch, variables


def run_cases(seed, cases, **kw):
    """The corpus' run: ({case: result dict}, [problem descriptions])."""
    results, problems, _ = CORPUS.run(seed, cases, **kw)
    return results, problems


def test_hostile_model_h5_files():
    n, seed = CORPUS.count(), CORPUS.seed(hostile_model_h5.DEFAULT_SEED)
    results, problems = run_cases(seed, list(range(n)))
    fails = [f"case {c} ({r['desc']}):\n    " + "\n    ".join(r["fails"]) for c, r in sorted(results.items())
             if r["fails"]]
    assert not problems, "crashes or hangs:\n" + "\n".join(problems)
    assert len(results) == n, f"{n - len(results)} cases gave no result"
    assert not fails, f"{len(fails)} of {n} cases failed (seed {seed}):\n" + "\n".join(fails[:30])
    # The generator must really test both answers, and every kind of damage.
    refused = sum(1 for r in results.values() if r["did"] == "refused")
    loaded = sum(1 for r in results.values() if r["did"] == "loaded")
    kinds = {k: sum(1 for r in results.values() if f"{k}: " in r["desc"]) for k in hostile_model_h5.DAMAGES}
    print(f"\nhostile .h5 models: {n} cases (seed {seed}): {refused} refused, {loaded} loaded; damages: "
          + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    assert refused > n // 2 and loaded > n // 20, (refused, loaded)
    assert n < 100 or min(kinds.values()) >= 5, kinds


def test_the_driver_names_a_crashing_case():
    results, problems = run_cases(hostile_model_h5.DEFAULT_SEED, list(range(5)), workers=1, batch=5,
                                  inject="crash:2")
    assert len(problems) == 1 and problems[0].startswith("case 2 ") and "died" in problems[0], problems
    assert "alone: exit status" in problems[0] and "--cases 2" in problems[0]
    assert sorted(results) == [0, 1, 3, 4]  # the cases after the crash ran in a new worker


def test_the_driver_names_a_hanging_case():
    results, problems = run_cases(hostile_model_h5.DEFAULT_SEED, list(range(3)), workers=1, batch=3,
                                  inject="hang:1", timeout=5)
    assert len(problems) == 1 and problems[0].startswith("case 1 ") and "hang" in problems[0], problems
    assert sorted(results) == [0, 2]
