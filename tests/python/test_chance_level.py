"""A result that is chance says so (issue 43, item 4): 10 classes give 0.10 by guessing, and an
accuracy of 0.11 on 2,000 images is no better. ``hpcnn.metrics.within_chance`` calls an accuracy
chance when it is at or below 1/classes plus 1.96 binomial standard errors for the number of
samples (what guessing reaches in ~97.5 % of evaluations); ``evaluate``'s summary line, the
tutorial and notebook 01 say "chance level" then, and the curves draw chance as a line on axes that
start at 0, so that noise is not drawn as a steep drop."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import hpcnn
import hpcnn.plot
from hpcnn.layers import Dense, InputLayer
from hpcnn.metrics import chance_bound, chance_note, within_chance
from tests.support import paths

ROOT = str(paths.ROOT)


def test_the_bound_is_the_binomial_one():
    p, bound = chance_bound(10, 1000)
    assert p == pytest.approx(0.1) and bound == pytest.approx(0.1 + 1.96 * np.sqrt(0.1 * 0.9 / 1000))
    assert chance_bound(1, 100)[0] == pytest.approx(0.5)          # a one-unit binary output: 2 classes
    assert chance_bound(10, 100)[1] > chance_bound(10, 10000)[1]  # fewer samples, a wider band


@pytest.mark.parametrize("accuracy, classes, samples, chance", [
    (0.11, 10, 2000, True),     # README's old command: 2 epochs of synthetic data
    (0.115, 10, 10000, False),  # 10,000 samples tell 0.115 from 0.10
    (0.94, 10, 2000, False),
    (0.0, 10, 2000, True),      # below chance is no better than chance
    (0.55, 2, 100, True),
    (0.65, 2, 100, False),
])
def test_within_chance(accuracy, classes, samples, chance):
    assert within_chance(accuracy, classes, samples) is chance
    assert bool(chance_note(accuracy, classes, samples)) is chance


def test_the_note_says_what_chance_is():
    note = chance_note(0.11, 10, 2000)
    assert note.startswith("chance level: 10 classes give 0.10 by guessing (up to 0.11 on 2,000 samples)"), note


@pytest.mark.parametrize("bad", [0, -1, 2.5, "10"])
def test_bad_counts_are_refused(bad):
    with pytest.raises((ValueError, TypeError), match="num_classes"):
        chance_bound(bad, 100)
    with pytest.raises((ValueError, TypeError), match="num_samples"):
        chance_bound(10, bad)


def one_hot_model(scale):
    """x is the one-hot of the class; Dense's kernel is scale * identity: scale 0 guesses (every
    row the same uniform output: class 0), scale 10 is right on every row."""
    m = hpcnn.Sequential([InputLayer(input_shape=(10,)), Dense(10, activation="softmax")])
    m.compile("adam", "categorical_crossentropy", metrics=["accuracy"])
    m.set_weights([np.eye(10, dtype=np.float32) * scale, np.zeros(10, np.float32)])
    return m


def data(n=1000):
    y = np.arange(n) % 10
    x = np.eye(10, dtype=np.float32)[y]
    return x, hpcnn.utils.to_categorical(y, 10)


def test_evaluates_summary_line_names_chance_level(capsys):
    x, y = data()
    loss, acc = one_hot_model(0.0).evaluate(x, y, verbose=2)
    assert acc == pytest.approx(0.1)
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert "accuracy: 0.1000" in line and "chance level: 10 classes give 0.10 by guessing" in line, line


def test_a_model_that_learned_gets_no_note(capsys):
    x, y = data()
    loss, acc = one_hot_model(10.0).evaluate(x, y, verbose=2)
    assert acc == 1.0
    assert "chance" not in capsys.readouterr().out


def test_silent_evaluate_prints_nothing(capsys):
    x, y = data()
    one_hot_model(0.0).evaluate(x, y, verbose=0)
    assert capsys.readouterr().out == ""


def test_a_regression_gets_no_note(capsys):
    m = hpcnn.Sequential([InputLayer(input_shape=(10,)), Dense(1)])
    m.compile("adam", "mse", metrics=["mae"])
    m.evaluate(np.zeros((20, 10), np.float32), np.zeros((20, 1), np.float32), verbose=2)
    assert "chance" not in capsys.readouterr().out


def test_the_tutorial_says_chance_level_when_it_is(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("HPCNN_DATA", "HPCNN_DATA_DIR")}
    env.update(HPCNN_DATA_DIR=str(tmp_path / "data"), MPLBACKEND="Agg")
    out = tmp_path / "tut"
    r = subprocess.run([sys.executable, "-m", "hpcnn", "tutorial", "--synthetic", "--epochs", "1", "--train-rows", "500",
                        "--device", "cpu", "--out", str(out), "--verbose", "2"],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    chance = within_chance(summary["test_accuracy"], 10, 500)
    assert ("chance level: 10 classes give 0.10" in r.stdout) is chance, r.stdout[-1500:]
    assert "cpu: " in r.stdout and " s for 1 epoch; " in r.stdout, r.stdout   # not "1 epochs" (item 6)


def test_notebook_01_says_chance_level_and_draws_it():
    with open(os.path.join(ROOT, "notebooks", "01_cifar10_cpu_vs_gpu.ipynb"), encoding="utf-8") as f:
        nb = json.load(f)
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert "hpcnn.metrics.chance_note(score[1], 10, len(x))" in code
    assert "num_classes=10" in code.split("hpcnn.plot.history(", 1)[1].split(";", 1)[0]


class TestCurves:
    @pytest.fixture(autouse=True)
    def plt(self):
        matplotlib = pytest.importorskip("matplotlib", reason="the curves need matplotlib (the `plot` or `jupyter` "
                                                              "extra)")
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        yield plt
        plt.close("all")

    NOISE = {"loss": [2.3040, 2.3031, 2.3025], "accuracy": [0.098, 0.101, 0.104],
             "val_loss": [2.3038, 2.3030, 2.3027], "val_accuracy": [0.1, 0.099, 0.103]}

    def test_axes_start_at_zero_and_chance_is_a_line_in_the_legend(self):
        fig = hpcnn.plot.history(self.NOISE, label="CPU", num_classes=10)
        loss_ax, acc_ax = fig.axes[:2]
        assert loss_ax.get_ylim()[0] == 0 and loss_ax.get_ylim()[1] >= 2.3040
        assert acc_ax.get_ylim() == (0, 1)
        chance = [ln for ln in acc_ax.get_lines() if ln.get_gid() == "chance-level"]
        assert len(chance) == 1 and set(chance[0].get_ydata()) == {0.1} and chance[0].get_linestyle() == "--"
        assert "chance (1/10 = 0.10)" in [t.get_text() for t in acc_ax.get_legend().get_texts()]

    def test_without_classes_no_chance_line(self):
        fig = hpcnn.plot.history(self.NOISE, label="CPU")
        assert not [ln for ln in fig.axes[1].get_lines() if ln.get_gid() == "chance-level"]
        assert fig.axes[1].get_ylim() == (0, 1) and fig.axes[0].get_ylim()[0] == 0
