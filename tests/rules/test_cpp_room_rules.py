"""The room rules of csrc/ (csrc/README.md), beside the include rule (test_include_rules.py).

1. No source over 500 lines: a .cpp, .cu, .h, .cuh (or .hpp, .cc) file under csrc/ of more than
   MAX_LINES lines fails, unless EXCEPTIONS lists it with its length when it was admitted and the
   reason it is one piece. The table may only shrink: a listed file that grows past its recorded
   length fails, and so does a row whose file is back under the limit (or gone): delete the row.
   Split a file by job instead of raising its number.
2. Tighter rooms: files that must stay smaller still (the model's spine), in TIGHTER.
3. The step knows no concrete layer: nn/model*.cpp and nn/model.h name no layer class in a cast
   (what each kind of node runs is nn/run_kinds.cpp's job, the one file that may cast).

Line counts are wc -l's: the newline characters of the file."""
import pathlib
import re
from tests.support import paths

CSRC = paths.ROOT / "csrc"
SOURCE_SUFFIXES = {".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh"}
MAX_LINES = 500

# path under csrc/ -> (its length when admitted: the most it may have, why it is one piece)
EXCEPTIONS = {
    "bindings/nn.cpp": (705, "hpcnn._core.Model's pybind11 class, one def per method over the model's "
                             "lock; next split: the layer and lowering functions apart from the Model "
                             "class (left whole while the Python step call changes it)"),
}

# path under csrc/ -> (at most this many lines, why)
TIGHTER = {
    "nn/model.cpp": (350, "the training step read top to bottom (forward, loss, backward, update); "
                          "what a node runs lives in nn/run_kinds.cpp, chunked inference in "
                          "nn/chunked_inference.cpp"),
    "nn/model.h": (300, "the Model's interface; a new job for the model gets its own object"),
}

# A cast naming a layer class: static_cast<Conv2DLayer&>, dynamic_cast<const BatchNormLayer*>, ...
LAYER_CAST = re.compile(r"(static|dynamic|reinterpret)_cast\s*<[^>]*Layer\b")
NO_LAYER_CASTS = ("nn/model*.cpp", "nn/model.h")


def line_count(path: pathlib.Path) -> int:
    """wc -l: the number of newline characters."""
    return path.read_bytes().count(b"\n")


def room_problems(root: pathlib.Path, exceptions: dict, tighter: dict, limit: int = MAX_LINES) -> list:
    """Every breach of rules 1 and 2 under `root` (a csrc/ tree), as 'file: what' strings."""
    problems = []
    lengths = {p.relative_to(root).as_posix(): line_count(p)
               for p in sorted(root.rglob("*")) if p.suffix in SOURCE_SUFFIXES and p.is_file()}
    for rel, n in lengths.items():
        if rel in exceptions:
            admitted, _ = exceptions[rel]
            if n > admitted:
                problems.append(f"{rel}: {n} lines, more than the {admitted} its exception admits: split it "
                                f"by job (the exceptions table may only shrink)")
            elif n <= limit:
                problems.append(f"{rel}: {n} lines, within the {limit} limit now: delete its row from the "
                                f"exceptions table")
        elif n > limit:
            problems.append(f"{rel}: {n} lines, over the {limit} limit: split it by job (csrc/README.md)")
        if rel in tighter and n > tighter[rel][0]:
            problems.append(f"{rel}: {n} lines, over its own limit of {tighter[rel][0]}: {tighter[rel][1]}")
    for rel in sorted(set(exceptions) | set(tighter)):
        if rel not in lengths:
            problems.append(f"{rel}: listed in a table but not under csrc/: delete its row")
    return problems


def layer_cast_problems(root: pathlib.Path, patterns=NO_LAYER_CASTS) -> list:
    """Every cast to a layer class in the files of `patterns` (rule 3), as 'file:line: text'."""
    problems = []
    for pattern in patterns:
        for path in sorted(root.glob(pattern)):
            for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                if LAYER_CAST.search(line):
                    problems.append(f"{path.relative_to(root).as_posix()}:{n}: a cast to a layer class "
                                    f"(say what the node runs in nn/run_kinds.cpp): {line.strip()}")
    return problems


def test_no_csrc_file_outgrows_its_room():
    problems = room_problems(CSRC, EXCEPTIONS, TIGHTER)
    assert not problems, "\n".join(problems)


def test_the_step_casts_to_no_layer_class():
    assert (CSRC / "nn" / "model.cpp").is_file() and (CSRC / "nn" / "run_kinds.cpp").is_file()
    problems = layer_cast_problems(CSRC)
    assert not problems, "\n".join(problems)


def test_every_exception_says_why():
    for rel, (admitted, why) in {**EXCEPTIONS, **TIGHTER}.items():
        assert isinstance(admitted, int) and admitted > 0, rel
        assert len(why.split()) >= 5, f"{rel}: give the reason in words"
    for rel, (admitted, _) in EXCEPTIONS.items():
        assert admitted > MAX_LINES, f"{rel}: an exception must be over the limit"


def test_csrc_readme_points_at_the_rule():
    readme = (CSRC / "README.md").read_text()
    assert "tests/rules/test_cpp_room_rules.py" in readme
    assert str(MAX_LINES) in readme


def write(root: pathlib.Path, rel: str, lines: int, text: str = "") -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text + "\n" * lines)


def test_the_checker_finds_each_kind_of_breach(tmp_path):
    write(tmp_path, "core/ok.h", 10)
    write(tmp_path, "core/at_limit.cpp", 10)
    write(tmp_path, "core/notes.txt", 50)  # not a source: not counted
    assert room_problems(tmp_path, {}, {}, limit=10) == []

    write(tmp_path, "ops/big.cu", 11)
    write(tmp_path, "ops/kept.cpp", 12)      # an exception at its length: fine
    write(tmp_path, "ops/grown.cuh", 14)     # an exception that grew
    write(tmp_path, "ops/shrunk.cpp", 9)     # an exception back under the limit
    write(tmp_path, "nn/model.cpp", 6)       # over its tighter limit
    exceptions = {"ops/kept.cpp": (12, "why"), "ops/grown.cuh": (13, "why"), "ops/shrunk.cpp": (20, "why"),
                  "ops/gone.cpp": (30, "why")}
    problems = "\n".join(room_problems(tmp_path, exceptions, {"nn/model.cpp": (5, "the spine")}, limit=10))
    assert "ops/big.cu: 11 lines, over the 10 limit" in problems
    assert "ops/grown.cuh: 14 lines, more than the 13 its exception admits" in problems
    assert "ops/shrunk.cpp: 9 lines, within the 10 limit now: delete its row" in problems
    assert "ops/gone.cpp: listed in a table but not under csrc/" in problems
    assert "nn/model.cpp: 6 lines, over its own limit of 5: the spine" in problems
    assert "ops/kept.cpp" not in problems and "core/" not in problems


def test_the_cast_checker_finds_a_layer_cast(tmp_path):
    write(tmp_path, "nn/model.cpp", 1, "int n = static_cast<int>(x.size());\nauto& l = g.layer(i);")
    write(tmp_path, "nn/model_loss.cpp", 1, "const double* h = reinterpret_cast<const double*>(p);\n")
    write(tmp_path, "nn/run_kinds.cpp", 1, "static_cast<Conv2DLayer&>(l).forward_folded(x);\n")
    assert layer_cast_problems(tmp_path) == []
    write(tmp_path, "nn/model_state.cpp", 1, "x;\nauto* bn = dynamic_cast<const BatchNormLayer*>(&l);\n")
    write(tmp_path, "nn/model.h", 1, "static_cast< MergeLayer &>(l);\n")
    problems = "\n".join(layer_cast_problems(tmp_path))
    assert "nn/model_state.cpp:2: a cast to a layer class" in problems
    assert "nn/model.h:1: a cast to a layer class" in problems
    assert "nn/run_kinds.cpp:" not in problems and "nn/model.cpp:" not in problems
