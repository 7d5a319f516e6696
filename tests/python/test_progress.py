"""Progress output as Keras does it: redrawn in place on a terminal, one updated display per bar in
Jupyter, one line per epoch in a file (sbatch logs). The Jupyter case is in test_notebooks.py."""
import io
import os
import pty
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from hpcnn import progress

# A fit with many batches and verbose=1 (what the tutorial in docs/tutorial.md and the notebook use). min_interval=0 makes
# the terminal bar redraw after every batch, so the test does not depend on timing.
FIT_SCRIPT = textwrap.dedent("""
    import numpy as np, hpcnn
    from hpcnn.layers import Dense, InputLayer
    hpcnn.progress.ProgressBar.min_interval = 0.0
    rng = np.random.default_rng(0)
    x = rng.random((120, 4), dtype=np.float32); y = rng.integers(0, 3, 120)
    m = hpcnn.Sequential([InputLayer(input_shape=(4,)), Dense(3, activation="softmax")])
    m.compile("adam", "sparse_categorical_crossentropy", ["accuracy"])
    m.fit(x, y, batch_size=4, epochs=3, verbose=1, validation_data=(x[:8], y[:8]))
    print("done")
""")
EPOCHS, STEPS = 3, 30


def run_in_pty(code):
    """Run `python -c code` with stdout and stderr on a pseudo-terminal; return what it wrote."""
    pid, fd = pty.fork()
    if pid == 0:  # child
        os.execv(sys.executable, [sys.executable, "-c", code])
    chunks = []
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, b"".join(chunks).decode(errors="replace")
    return b"".join(chunks).decode(errors="replace").replace("\r\n", "\n")


def test_terminal_redraws_in_place():
    out = run_in_pty(FIT_SCRIPT)
    assert "done" in out
    for e in range(1, EPOCHS + 1):
        assert f"Epoch {e}/{EPOCHS}\n" in out
    # Every batch redraws the same line ('\r' + the bar), and each epoch's bar ends in a newline.
    redraws = re.findall(r"\r *\d+/30 \[", out)
    assert len(redraws) >= EPOCHS * STEPS, len(redraws)
    assert len(re.findall(rf"\r{STEPS}/{STEPS} \[=+\].*val_accuracy.*\n", out)) == EPOCHS


def test_file_gets_one_line_per_epoch(tmp_path):
    log = tmp_path / "job.out"
    with open(log, "w") as f:  # what an sbatch job's stdout is
        r = subprocess.run([sys.executable, "-c", FIT_SCRIPT], stdout=f, stderr=subprocess.STDOUT, timeout=300)
    text = log.read_text()
    assert r.returncode == 0, text
    assert "\r" not in text and "\x1b" not in text
    lines = text.splitlines()
    bar_lines = [l for l in lines if re.match(r"\d+/\d+ ", l)]
    assert len(bar_lines) == EPOCHS, text                   # one line per epoch, at its end
    assert all(l.startswith(f"{STEPS}/{STEPS} - ") and "val_accuracy" in l for l in bar_lines)
    assert sum(l.startswith("Epoch ") for l in lines) == EPOCHS


def test_bar_in_a_file_writes_only_at_the_end():
    buf = io.StringIO()
    bar = progress.ProgressBar(50, verbose=1, stream=buf, title="Epoch 1/1")
    for b in range(1, 51):
        bar.update(b, {"loss": 1.0 / b})
    assert buf.getvalue() == "Epoch 1/1\n"
    bar.finish({"loss": 0.02, "accuracy": 0.5})
    assert buf.getvalue().count("\n") == 2 and "\r" not in buf.getvalue()
    assert buf.getvalue().splitlines()[1].startswith("50/50 - ")


def test_output_kind():
    assert progress.output_kind(io.StringIO()) == progress.FILE
    master, slave = pty.openpty()
    try:
        with os.fdopen(slave, "w", closefd=False) as tty:
            assert progress.output_kind(tty) == progress.TERMINAL
    finally:
        os.close(master)
        os.close(slave)


def test_verbose_auto_in_a_file_is_one_line_per_epoch(tmp_path):
    script = FIT_SCRIPT.replace("verbose=1", "verbose='auto'")
    log = tmp_path / "auto.out"
    with open(log, "w") as f:
        subprocess.run([sys.executable, "-c", script], stdout=f, stderr=subprocess.STDOUT, timeout=300, check=True)
    text = log.read_text()
    assert "\r" not in text and len([l for l in text.splitlines() if re.match(r"\d+/\d+ ", l)]) == EPOCHS


def test_the_last_bar_of_an_epoch_is_drawn_once_on_a_terminal():
    """Issue 14: the complete bar was drawn by the last batch's update and again by finish; now
    finish alone draws it (with the epoch's final logs)."""
    out = run_in_pty(FIT_SCRIPT)
    assert len(re.findall(rf"\r *{STEPS}/{STEPS} \[", out)) == EPOCHS, out


def test_verbose_auto_is_one_as_in_keras(monkeypatch):
    for kind in (progress.TERMINAL, progress.FILE, progress.JUPYTER):
        monkeypatch.setattr(progress, "output_kind", lambda stream=None, k=kind: k)
        assert progress.resolve_verbose("auto") == 1 and progress.resolve_verbose(None) == 1
