"""`hpcnn export MODEL OUT` end to end in a process of its own: a model saved by hpcnn and one saved
by Keras become an ONNX file (and OpenVINO IR) that predict as the model does; what it refuses is
a message on stderr (no traceback) and exit status 1, with nothing written."""
import subprocess
import sys

import pytest

import hpcnn
from tests.support import paths
from tests.support.export_engines import assert_same, engine, images, onnxruntime_predict, openvino_predict

ENGINES = ("onnx", "onnxruntime", "openvino")


@pytest.fixture(autouse=True)
def engines():
    """Skipped with the reason without the packages (an error under HPCNN_EXPECT_EXPORT=1)."""
    for name in ENGINES:
        engine(name)


def hpcnn_cli(*args):
    return subprocess.run([sys.executable, "-m", "hpcnn", *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=paths.ROOT)


def test_a_keras_saved_file_becomes_an_onnx_file_and_openvino_ir(tmp_path):
    source = paths.KERAS_DATA / "k3_resblock.keras"
    r = hpcnn_cli("export", source, tmp_path / "block.onnx", "--opset", "21")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"Saved artifact at '{tmp_path / 'block.onnx'}'."
    r = hpcnn_cli("export", source, tmp_path / "block.xml")  # the format from the suffix
    assert r.returncode == 0, r.stderr
    assert "Saved OpenVINO IR at" in r.stdout and (tmp_path / "block.bin").exists()
    model = hpcnn.models.load_model(source)
    x = images(model.sample_shape, 64)
    want = model.predict(x)
    assert_same(onnxruntime_predict(tmp_path / "block.onnx", x), want, "hpcnn export, ONNX Runtime")
    assert_same(openvino_predict(tmp_path / "block.xml", x), want, "hpcnn export, OpenVINO")


def test_an_hpcnn_saved_model_with_the_format_said(tmp_path):
    model = hpcnn.applications.tutorial_cnn(seed=3)
    model.save(tmp_path / "cnn.keras")
    r = hpcnn_cli("export", tmp_path / "cnn.keras", tmp_path / "cnn.xml", "--format", "openvino")
    assert r.returncode == 0, r.stderr
    x = images((32, 32, 3), 1)
    assert_same(openvino_predict(tmp_path / "cnn.xml", x), model.predict(x), "hpcnn export --format openvino")


@pytest.mark.parametrize("args, message", [
    (["missing.keras", "out.onnx"], "hpcnn export: MissingFile: [Errno 2] load_model: no such file: "),
    (["cnn.keras", "out.onnx", "--format", "openvino"], "hpcnn export: ValueError: export: The OpenVINO export "
                                                        "requires the filepath to end with '.xml'"),
    (["cnn.keras", "out.onnx", "--opset", "7"], "hpcnn export: ValueError: "),
])
def test_refusals_are_messages_and_write_nothing(args, message, tmp_path):
    hpcnn.applications.tutorial_cnn(seed=3).save(tmp_path / "cnn.keras")
    r = hpcnn_cli("export", *[tmp_path / a if not a.startswith("-") and not a.isdigit() and a != "openvino" else a
                              for a in args])
    assert r.returncode == 1 and r.stderr.startswith(message) and "Traceback" not in r.stderr, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cnn.keras"]


def test_the_format_choices_are_the_two_hpcnn_writes(tmp_path):
    r = hpcnn_cli("export", "m.keras", "m.pb", "--format", "tf_saved_model")
    assert r.returncode == 2 and "invalid choice: 'tf_saved_model' (choose from onnx, openvino)" in r.stderr.replace(
        "'onnx', 'openvino'", "onnx, openvino")


def test_without_onnx_the_command_says_what_to_install(tmp_path, monkeypatch, capsys):
    from hpcnn import cli
    hpcnn.applications.tutorial_cnn(seed=3).save(tmp_path / "cnn.keras")
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx now raises ImportError
    assert cli.main(["export", str(tmp_path / "cnn.keras"), str(tmp_path / "m.onnx")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("hpcnn export: ImportError: export to ONNX needs the 'onnx' package") and "[export]" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cnn.keras"]
