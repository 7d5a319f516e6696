"""Every command hpcnn tells a user to run exists and takes the options it is shown with, and the
CIFAR-10 download route (`hpcnn convert cifar10 --download`) works: download, MD5 check,
conversion to the tutorial's HDF5 file. No network: downloads come from file:// URLs
($HPCNN_CIFAR10_URL) of small archives in the official format that the tests write."""
import functools
import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.support.cifar_files import cifar_python_tar, expected_cifar, fake_cifar
from hpcnn import cli, convert, datasets, suggestions
from hpcnn.datasets import cifar10
from tests.support import paths

ROOT = paths.ROOT
SUBCOMMANDS = ("info", "devices", "bench", "collect", "tutorial", "convert", "export")

# `hpcnn SUB ...` or `python -m hpcnn[.convert] ...`, up to the end of the line, a backtick, a
# quote, a closing parenthesis or a comment.
COMMAND = re.compile(r"(?:python3? -m hpcnn(?P<module>\.convert)?|(?<![\w./-])hpcnn)"
                     r"(?P<rest>(?: +[^\s`'\"()#]+)*)")


def suggested_commands():
    """(where, command) for every hpcnn command named in the package's messages and help texts, the
    C++ messages, README and the docs/ pages, the Slurm scripts and the notebooks, plus hpcnn.suggestions."""
    files = [p for p in (ROOT / "python" / "hpcnn").rglob("*.py")]
    files += [p for p in (ROOT / "csrc").rglob("*") if p.suffix in (".cpp", ".h", ".cu")]
    files += [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md")) + sorted((ROOT / "slurm").iterdir()) + sorted((ROOT / "notebooks").glob("*.ipynb"))
    found = {}
    for path in files:
        for line in path.read_text(errors="replace").splitlines():
            for m in COMMAND.finditer(line):
                words = m.group("rest").split()
                if m.group("module"):
                    words = ["convert"] + words
                if not words or words[0] not in SUBCOMMANDS:
                    continue
                found.setdefault(" ".join(words), str(path.relative_to(ROOT)))
    for cmd in suggestions.all_commands():
        found.setdefault(cmd[len("hpcnn "):], "hpcnn/suggestions.py")
    return sorted(found.items())


def hpcnn_help(words):
    """`hpcnn SUB [KIND] --help` output (KIND for convert, whose parser takes it first)."""
    args = words[:2] if words[0] == "convert" and len(words) > 1 and re.fullmatch(r"[a-z_0-9]+", words[1]) \
        else words[:1]
    return _help(tuple(args))


@functools.lru_cache(maxsize=None)
def _help(args):  # one process per distinct `hpcnn SUB [KIND] --help`
    r = subprocess.run([sys.executable, "-m", "hpcnn", *args, "--help"], capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout + r.stderr


def test_the_scan_finds_the_commands_it_must_check():
    cmds = dict(suggested_commands())
    assert "convert cifar10 --download" in cmds          # the message of the tutorial without data
    assert any(c.startswith("tutorial --synthetic") for c in cmds)
    assert any(c.startswith("bench") and "--peers" in c for c in cmds)


@pytest.mark.parametrize("command,where", suggested_commands())
def test_every_suggested_command_exists_with_its_options(command, where):
    words = command.split()
    rc, text = hpcnn_help(words)
    assert rc == 0, f"`hpcnn {command}` (from {where}): --help failed:\n{text}"
    for opt in re.findall(r"(?<![\w-])--[a-z][\w-]*", command):
        assert re.search(rf"(?<![\w-]){re.escape(opt)}\b", text), \
            f"`hpcnn {command}` (from {where}) names {opt}, which `hpcnn {words[0]} --help` does not know"
    if words[0] == "convert" and len(words) > 1 and re.fullmatch(r"[a-z_0-9]+", words[1]):
        assert words[1] in ["info"] + convert.KINDS, command


def test_hpcnn_help_is_complete():
    r = subprocess.run([sys.executable, "-m", "hpcnn", "--help"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0
    for sub in SUBCOMMANDS:
        assert f"hpcnn {sub}" in r.stdout
    # No description line stops mid-sentence (the old one ended in "why a GPU cannot be").
    assert not re.search(r"\b(be|a|the|and|or|to|of)\n", r.stdout), r.stdout


# ------------------------------------------------------------------ the download route
def no_data_env(tmp_path, url):
    env = dict(os.environ, HPCNN_DATA_DIR=str(tmp_path / "data"), HPCNN_CIFAR10_URL=url)
    env.pop("HPCNN_DATA", None)
    return env


def test_tutorial_without_cifar10_gives_command_line_advice(tmp_path):
    """A command-line user is told commands and options, never Python arguments, and each
    command in the message exists."""
    env = no_data_env(tmp_path, (tmp_path / "nowhere" / "cifar.tar.gz").as_uri())
    r = subprocess.run([sys.executable, "-m", "hpcnn", "tutorial", "--device", "cpu", "--out", str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode != 0
    msg = r.stderr
    assert "hpcnn convert cifar10 --download" in msg and "hpcnn tutorial --data" in msg
    assert "hpcnn tutorial --synthetic" in msg and "path=" not in msg
    assert "Traceback" not in msg
    commands = [m.group("rest").split() for m in COMMAND.finditer(msg)]
    commands = [w for w in commands if w and w[0] in SUBCOMMANDS]
    assert len(commands) >= 3, msg
    for words in commands:
        rc, text = hpcnn_help(words)
        assert rc == 0, words
        for opt in [w for w in words if w.startswith("--")]:
            assert opt in text, (words, opt)
    assert not (tmp_path / "data" / "dataset_cifar10.hdf5").exists()


def test_python_api_without_cifar10_gives_python_advice(tmp_path, monkeypatch):
    monkeypatch.setenv("HPCNN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("HPCNN_CIFAR10_URL", (tmp_path / "nowhere.tar.gz").as_uri())
    with pytest.raises(datasets.DatasetUnavailable) as e:
        cifar10.load_data()
    assert isinstance(e.value, FileNotFoundError)
    assert "path=" in str(e.value) and "hpcnn convert cifar10 --download" in str(e.value)
    assert not list((tmp_path / "data").glob("*.part"))


def test_convert_download_fetches_verifies_and_converts(tmp_path, monkeypatch, capsys):
    batches = fake_cifar()
    archive = cifar_python_tar(tmp_path / "mirror.tar.gz", batches)
    monkeypatch.setenv("HPCNN_CIFAR10_URL", Path(archive).as_uri())
    monkeypatch.setattr(cifar10, "MD5", hashlib.md5(Path(archive).read_bytes()).hexdigest())
    data_dir = tmp_path / "data"
    assert cli.main(["convert", "cifar10", "--download", "--data-dir", str(data_dir)]) == 0
    out = capsys.readouterr().out
    h5 = data_dir / "dataset_cifar10.hdf5"
    assert (data_dir / "cifar-10-python.tar.gz").exists() and h5.exists()
    assert str(h5) in out and "checksums verified" in out
    (xt, yt), (xv, yv) = datasets.converters.load_hdf5(str(h5))
    (ext, eyt), (exv, eyv) = expected_cifar(batches)
    np.testing.assert_array_equal(xt, ext)
    np.testing.assert_array_equal(yt, eyt)
    np.testing.assert_array_equal(xv, exv)
    np.testing.assert_array_equal(yv, eyv)
    # Again: nothing downloaded or converted, the files are verified and reused.
    before = h5.stat().st_mtime_ns
    monkeypatch.setenv("HPCNN_CIFAR10_URL", (tmp_path / "gone.tar.gz").as_uri())
    assert cli.main(["convert", "cifar10", "--download", "--data-dir", str(data_dir)]) == 0
    assert "reused" in capsys.readouterr().out and h5.stat().st_mtime_ns == before
    # load_data() without a path now finds them in the data dir.
    monkeypatch.setenv("HPCNN_DATA_DIR", str(data_dir))
    (xt2, _), _ = cifar10.load_data()
    np.testing.assert_array_equal(xt2, ext)


def test_convert_download_with_a_wrong_checksum_leaves_nothing(tmp_path):
    """The real MD5 against a file that is not the real archive: refused, no file left behind."""
    archive = cifar_python_tar(tmp_path / "not-the-real-one.tar.gz", fake_cifar())
    env = no_data_env(tmp_path, Path(archive).as_uri())
    r = subprocess.run([sys.executable, "-m", "hpcnn", "convert", "cifar10", "--download"], capture_output=True,
                       text=True, timeout=120, env=env)
    assert r.returncode == 2
    assert "checksum mismatch" in r.stderr and cifar10.MD5 in r.stderr
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").iterdir())


def test_convert_download_without_network_says_what_to_do(tmp_path):
    env = no_data_env(tmp_path, (tmp_path / "nowhere.tar.gz").as_uri())
    r = subprocess.run([sys.executable, "-m", "hpcnn", "convert", "cifar10", "--download"], capture_output=True,
                       text=True, timeout=120, env=env)
    assert r.returncode == 2
    assert "cannot be downloaded" in r.stderr and "hpcnn convert cifar10 --download" in r.stderr
    assert "Traceback" not in r.stderr and "path=" not in r.stderr


def test_convert_without_src_points_to_download(capsys):
    with pytest.raises(SystemExit):
        cli.main(["convert", "cifar10"])
    assert "--download" in capsys.readouterr().err
