"""A seeded corpus of hostile model files, and the judge of what hpcnn does with them.

Used by tests/hostile/test_hostile_models.py, which runs the cases in worker subprocesses (a crash or a
hang there must not take pytest down) and reports any case that fails. The families of files and
the kinds of damage are registered in tests/support/hostile_model_kinds.py (today: .keras archives and
model_from_json text, from tests/support/hostile_keras_cases.py). Run by hand:

    python -m tests.support.hostile_models --seed 26 --cases 0:300           # run cases, one JSON line each
    python -m tests.support.hostile_models --seed 26 --cases 137 --verbose   # one case, with details
    python -m tests.support.hostile_models --seed 26 --cases 137 --keep DIR  # ... and keep its file in DIR
    python -m tests.support.hostile_models --counts 300                      # cases per kind in 300

Each case prints "START i" and then a "RESULT {json}" line. A case must end in the right result
(the base file's model: its weights and, unless the damage changed it, its architecture) or a
clean refusal: a ValueError or NotImplementedError (or a MemoryError of hpcnn's own) whose message
names the file. Cases marked must_refuse (code, custom objects, a limit passed) may not load;
cases marked must_load (valid variants) may not be refused. After every case: no file appeared in
the worker's folder but the case file (nothing extracted, nothing written outside), the payload
module a hostile config names was never imported, and no hostile code ran.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import sys
import tempfile
import traceback

import numpy as np

from tests.support import archive_tools as at
from tests.support import hostile_driver
from tests.support import hostile_model_kinds as registry

DEFAULT_SEED = 26
# The worker's address-space limit: a small hostile file must never make hpcnn allocate near it.
# Not under ASan (its shadow memory reserves terabytes of address space).
ADDRESS_SPACE_LIMIT = 3 << 30
CLEAN = (ValueError, NotImplementedError)


def sanitized() -> bool:
    return "asan" in os.environ.get("LD_PRELOAD", "") or bool(os.environ.get("HPCNN_SANITIZE"))


class Corpus:
    """The registry's kinds and each family's bases (built once per worker)."""

    def __init__(self):
        self.cycle = registry.load_registry()
        self._bases = {}

    def bases(self, family):
        if family not in self._bases:
            self._bases[family] = registry.FAMILIES[family].bases()
        return self._bases[family]

    def case(self, seed, index):
        k = self.cycle[index % len(self.cycle)]
        rng = np.random.default_rng([seed, index])
        return k, k.make(rng, self.bases(k.family))


def judge(family, case, base_of, path, load):
    """(what happened, [failures])."""
    try:
        got = load(path)
    except CLEAN + (MemoryError,) as e:
        msg = str(e)
        fails = []
        if isinstance(e, MemoryError) and not family.names_file(msg, path):
            fails.append(f"MemoryError not naming the file: {msg[:300]}")
        elif not family.names_file(msg, path):
            fails.append(f"{type(e).__name__} does not name the file: {msg[:300]}")
        if case.must_load:
            fails.append(f"refused a valid file: {type(e).__name__}: {msg[:300]}")
        return f"refused: {type(e).__name__}: {msg[:160]}", fails
    except Exception as e:  # noqa: BLE001  (anything else is what the corpus is here to find)
        return "raised", [f"unclean {type(e).__name__}: {str(e)[:300]}\n{traceback.format_exc()[-1200:]}"]
    if case.must_refuse:
        return "loaded", ["loaded a file that must be refused"]
    why = family.same(got, base_of, case)
    return "loaded", [why] if why else []


def check_case(corpus, seed, index, workdir, keep=None):
    k, case = corpus.case(seed, index)
    family = registry.FAMILIES[k.family]
    base = next(b for b in corpus.bases(k.family) if case.desc.startswith(b.name + ":"))
    folder = os.path.join(workdir, "case")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"case{index}{family.suffix}")
    with open(path, "wb") as f:
        f.write(case.data)
    if keep:
        os.makedirs(keep, exist_ok=True)
        with open(os.path.join(keep, f"seed{seed}_case{index}{family.suffix}"), "wb") as f:
            f.write(case.data)
    before = _listing(workdir)
    did, fails = judge(family, case, base, path, family.load)
    after = _listing(workdir)
    if after != before:
        fails.append(f"files appeared or vanished around the case file: {sorted(after ^ before)[:10]}")
    if at.PAYLOAD_MODULE in sys.modules or os.path.exists(os.path.join(workdir, "payload", "imported")):
        fails.append(f"the module {at.PAYLOAD_MODULE} a hostile file names was imported")
    if os.path.exists(os.path.join(workdir, "hostile_code_ran")):
        fails.append("code from the file ran")
    os.remove(path)
    return k.name, case.desc, did, fails


def _listing(top):
    out = set()
    for root, dirs, files in os.walk(top):
        out.update(os.path.join(root, n) for n in dirs + files)
    return out


def counts(n):
    """{kind: number of cases} among cases 0..n-1."""
    cycle = registry.load_registry()
    return dict(collections.Counter(cycle[i % len(cycle)].name for i in range(n)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--cases", help="indices: '0:100', '5,9,12'")
    ap.add_argument("--keep", help="keep the case files in this directory")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--counts", type=int, help="print the number of cases of each kind among this many, and exit")
    ap.add_argument("--inject", help="test the harness: 'crash:I' or 'hang:I' at case I")
    args = ap.parse_args(argv)
    if args.counts:
        print(json.dumps(counts(args.counts), indent=1))
        return 0
    if not sanitized():
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))
    import hpcnn
    hpcnn.set_num_threads(1)
    corpus = Corpus()
    with tempfile.TemporaryDirectory(prefix="hpcnn-hostile-models-") as workdir:
        os.chdir(workdir)  # relative paths a hostile file names land here, where they are looked for
        payload = os.path.join(workdir, "payload")
        os.makedirs(payload)
        with open(os.path.join(payload, f"{at.PAYLOAD_MODULE}.py"), "w") as f:
            f.write(at.payload_source(os.path.join(payload, "imported")))
        sys.path.insert(0, payload)
        def run_case(i):
            kind_name, desc, did, fails = check_case(corpus, args.seed, i, workdir, args.keep)
            return {"kind": kind_name, "desc": desc, "did": did, "fails": fails}

        hostile_driver.serve(args.cases or "", args.inject, run_case, verbose_line=(lambda i, r: (
            f"  case {i} [{r.get('kind', '?')}] {r['desc']}: {r['did']}: {'ok' if not r['fails'] else r['fails']}"))
            if args.verbose else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
