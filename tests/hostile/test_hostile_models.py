"""Hostile model files: hundreds of damaged and hostile .keras archives and model_from_json texts,
each the right model or a clean refusal naming the file (issue 26).

The cases come from tests/support/hostile_models.py (the runner and judge) and the kinds registered in
tests/support/hostile_model_kinds.py (tests/support/hostile_keras_cases.py today). They run in worker
subprocesses (tests/support/hostile_corpora.py: cases per worker, workers at a time): a case that
crashes (a segfault, an abort from a sanitizer) or hangs takes down only its worker. The driver then names the case with its
seed, re-runs it alone to confirm, and carries on with the rest of that worker's cases in a new one.

    HPCNN_HOSTILE_MODEL_CASES=6000 HPCNN_HOSTILE_MODEL_SEED=7 python -m pytest -q -s tests/hostile/test_hostile_models.py

runs more cases or another seed (CI runs the default: the cases of its row in tests/support/hostile_corpora.py, seed 26).
"""
from __future__ import annotations

import collections
import subprocess
import sys
import time


from tests.support import hostile_model_kinds
from tests.support import hostile_models
from tests.support import paths
from tests.support.hostile_corpora import CORPORA

hostile_model_kinds.load_registry()

CORPUS = CORPORA["models"]  # its row: generator, cases, batch, variables
DEFAULT_CASES = CORPUS.cases


def run_cases(seed, cases, **kw):
    """The corpus' run: ({case: result dict}, [problem descriptions])."""
    results, problems, _ = CORPUS.run(seed, cases, **kw)
    return results, problems


def test_hostile_model_files():
    n, seed = CORPUS.count(), CORPUS.seed(hostile_models.DEFAULT_SEED)
    start = time.monotonic()
    results, problems = run_cases(seed, list(range(n)))
    fails = [f"case {c} [{r['kind']}] {r['desc']}:\n    " + "\n    ".join(r["fails"]) for c, r in sorted(results.items())
             if r["fails"]]
    assert not problems, "crashes or hangs:\n" + "\n".join(problems)
    assert len(results) == n, f"{n - len(results)} cases gave no result"
    assert not fails, (f"{len(fails)} of {n} cases failed (seed {seed}; reproduce one with: python -m tests.support.{CORPUS.module} --seed "
                       f"{seed} --cases I --verbose):\n" + "\n".join(fails[:30]))
    by_kind = collections.defaultdict(collections.Counter)
    for r in results.values():
        by_kind[r["kind"]][r["did"].split(":")[0]] += 1
    print(f"\nhostile model files: {n} cases (seed {seed}) in {time.monotonic() - start:.1f} s")
    for k, c in sorted(by_kind.items()):
        print(f"  {k}: {dict(c)}")
    # The corpus must really test both answers: files hpcnn refuses and files it loads.
    refused = sum(c["refused"] for c in by_kind.values())
    loaded = sum(c["loaded"] for c in by_kind.values())
    assert refused > n // 3 and loaded > n // 10, (refused, loaded)
    if n >= DEFAULT_CASES:
        assert set(by_kind) == set(hostile_model_kinds.KINDS), set(hostile_model_kinds.KINDS) - set(by_kind)


def test_a_case_is_the_same_file_on_every_run():
    """The seed reproduces a case: its bytes do not depend on the worker, the time or the folder."""
    out = []
    for _ in range(2):
        code = ("from tests.support import hostile_models; import hashlib; c = hostile_models.Corpus(); "
                "print([hashlib.sha256(c.case(26, i)[1].data).hexdigest() for i in range(0, 120, 7)])")
        out.append(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                  cwd=paths.ROOT).stdout)
    assert out[0] == out[1] and out[0].count("'") == 2 * len(range(0, 120, 7)), out


def test_every_kind_is_in_the_default_run():
    counts = hostile_models.counts(DEFAULT_CASES)
    assert set(counts) == set(hostile_model_kinds.KINDS) and min(counts.values()) >= 10, counts


def test_the_driver_names_a_crashing_case():
    results, problems = run_cases(hostile_models.DEFAULT_SEED, list(range(6)), workers=1, batch=6, inject="crash:3")
    assert len(problems) == 1 and problems[0].startswith("case 3 ") and "died" in problems[0], problems
    assert "alone: exit status" in problems[0] and "--cases 3" in problems[0]
    assert sorted(results) == [0, 1, 2, 4, 5]  # the cases after the crash ran in a new worker


def test_the_driver_names_a_hanging_case():
    results, problems = run_cases(hostile_models.DEFAULT_SEED, list(range(4)), workers=1, batch=4, inject="hang:1",
                                  timeout=5)
    assert len(problems) == 1 and problems[0].startswith("case 1 ") and "hang" in problems[0], problems
    assert sorted(results) == [0, 2, 3]
