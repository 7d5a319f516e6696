"""Small wording a newcomer reads (issue 43, item 6): summary() names the loss as compiled
(from_logits=True changes what the last layer must output); a skip reason says why the test does
not run here, not a fact about this machine. ("1 epoch", not "1 epochs": test_chance_level.py runs
the tutorial for one epoch.)"""
import ast
import pathlib

import pytest

import hpcnn
from hpcnn.layers import Dense, InputLayer
from hpcnn.losses import CategoricalCrossentropy, SparseCategoricalCrossentropy
from tests.support import paths

ROOT = paths.ROOT


def summary_text(loss):
    logits = getattr(loss, "from_logits", False)
    m = hpcnn.Sequential([InputLayer(input_shape=(4,)), Dense(3, activation=None if logits else "softmax")])
    m.compile("adam", loss, metrics=["accuracy"])
    lines = []
    m.summary(print_fn=lines.append)
    return next(line for line in lines if line.startswith("Optimizer: "))


@pytest.mark.parametrize("loss, shown", [
    ("sparse_categorical_crossentropy", "loss: sparse_categorical_crossentropy"),
    (SparseCategoricalCrossentropy(from_logits=True), "loss: sparse_categorical_crossentropy (from_logits=True)"),
    (CategoricalCrossentropy(from_logits=True, label_smoothing=0.1),
     "loss: categorical_crossentropy (from_logits=True, label_smoothing=0.1)"),
    (CategoricalCrossentropy(label_smoothing=0.2), "loss: categorical_crossentropy (label_smoothing=0.2)"),
])
def test_summary_names_the_loss_as_compiled(loss, shown):
    line = summary_text(loss)
    assert line.endswith(shown), line


def skip_reasons(path):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "skip"
                and node.args and isinstance(node.args[0], ast.Constant)):
            yield node.args[0].value


def test_the_installed_notebooks_skip_reason_says_what_the_test_needs():
    reasons = [r for r in skip_reasons(ROOT / "tests" / "system" / "test_notebook_run.py") if "notebooks" in r]
    assert reasons and all(r.startswith("needs ") and "source tree" in r for r in reasons), reasons
