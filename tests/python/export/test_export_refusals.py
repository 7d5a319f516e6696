"""What model.export refuses, each with a message naming what is wrong, before anything is written:
a layer hpcnn cannot export (named with its class), formats other than ONNX and OpenVINO (naming
those two), bad arguments; and a failed write leaves the file that was there."""
import sys

import numpy as np
import pytest

import hpcnn
from hpcnn.layers import Conv2D, Dense, Flatten, Input
from tests.support.export_engines import engine


def small(seed=1):
    x = Input(shape=(6, 6, 2))
    return hpcnn.Model(x, Dense(3)(Flatten()(Conv2D(4, 3)(x))), seed=seed)


class ScaledDense(Dense):
    """A user's layer: hpcnn computes it as a Dense, but its class could mean anything else."""

    def core_config(self):
        return dict(super().core_config(), class_name="Dense")


def test_a_layer_export_does_not_know_is_refused_by_name_and_class(tmp_path):
    engine("onnx")
    x = Input(shape=(6, 6, 2))
    model = hpcnn.Model(x, ScaledDense(3, name="scaled")(Flatten()(Conv2D(4, 3)(x))))
    with pytest.raises(NotImplementedError, match=r"export: layer 'scaled' \(ScaledDense\) cannot be exported to "
                                                  r"ONNX: hpcnn exports its own layers \(.*Conv2D.*\)"):
        model.export(tmp_path / "m.onnx")
    nested = hpcnn.Sequential([Input(shape=(6, 6, 2)), hpcnn.Sequential([Flatten(), ScaledDense(3, name="inner")])])
    with pytest.raises(NotImplementedError, match=r"layer 'inner' \(ScaledDense\)"):
        nested.export(tmp_path / "m.xml", format="openvino")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("fmt, what", [("tf_saved_model", "TensorFlow's SavedModel"), ("litert", "LiteRT"),
                                       ("torch", "a PyTorch ExportedProgram")])
def test_kerases_other_formats_are_refused_naming_the_two_hpcnn_writes(fmt, what, tmp_path):
    with pytest.raises(ValueError, match=rf"export: format='{fmt}' \({what}.*\) needs Keras on TensorFlow or PyTorch; "
                                         r"hpcnn writes format='onnx' or format='openvino'"):
        small().export(tmp_path / "m", format=fmt)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("fmt", ["ONNX", "pb", None, 3])
def test_an_unknown_format_is_refused_with_the_supported_ones(fmt, tmp_path):
    with pytest.raises(ValueError, match=r"Unrecognized format=.*Supported formats are: \['onnx', 'openvino'\]"):
        small().export(tmp_path / "m.onnx", format=fmt)


def test_bad_arguments_are_refused_before_writing(tmp_path):
    engine("onnx")
    m = small()
    with pytest.raises(ValueError, match=r"The OpenVINO export requires the filepath to end with '\.xml'"):
        m.export(tmp_path / "m.onnx", format="openvino")
    with pytest.raises(ValueError, match="opset_version"):
        m.export(tmp_path / "m.onnx", opset_version=12)
    with pytest.raises(ValueError, match="opset_version"):
        m.export(tmp_path / "m.onnx", opset_version=1000)
    with pytest.raises(ValueError, match="opset_version is an argument of format='onnx'"):
        m.export(tmp_path / "m.xml", format="openvino", opset_version=18)
    with pytest.raises(TypeError, match="Unrecognized keyword arguments passed to export: {'is_static': True}"):
        m.export(tmp_path / "m.onnx", is_static=True)
    with pytest.raises(ValueError, match=r"input_signature's shape \(None, 7, 7, 2\) does not fit the model's input "
                                         r"\(None, 6, 6, 2\)"):
        m.export(tmp_path / "m.onnx", input_signature=[Input(shape=(7, 7, 2))])
    with pytest.raises(ValueError, match="input_signature must describe the model's one input"):
        m.export(tmp_path / "m.onnx", input_signature=[Input(shape=(6, 6, 2)), Input(shape=(6, 6, 2))])
    with pytest.raises(TypeError, match="input_signature must be a spec with a shape"):
        m.export(tmp_path / "m.onnx", input_signature="images")
    with pytest.raises(ValueError, match="input_signature's dtype must be float32 or uint8, got 'float64'"):
        m.export(tmp_path / "m.onnx", input_signature=np.zeros((1, 6, 6, 2)))
    with pytest.raises(FileNotFoundError):
        m.export(tmp_path / "no_such_folder" / "m.onnx")
    assert list(tmp_path.iterdir()) == []


def test_models_export_cannot_write_are_refused(tmp_path):
    with pytest.raises(ValueError, match="export: the model has no input shape yet"):
        hpcnn.Sequential([Dense(3)]).export(tmp_path / "m.onnx")
    x = Input(shape=(6, 6, 2))
    y = Conv2D(4, 3)(x)
    with pytest.raises(NotImplementedError, match="export: this model has 2 outputs"):
        hpcnn.Model(x, [y, Dense(3)(Flatten()(y))]).export(tmp_path / "m.onnx")


def test_without_onnx_the_error_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx now raises ImportError
    with pytest.raises(ImportError, match=r"export to ONNX needs the 'onnx' package.*pip install --no-build-isolation "
                                          r"\"\.\[export\]\"\) or the package alone \(pip install onnx\)"):
        small().export(tmp_path / "m.onnx")
    assert list(tmp_path.iterdir()) == []


def test_a_failed_write_leaves_the_file_that_was_there(tmp_path, monkeypatch):
    onnx = engine("onnx")
    path = tmp_path / "m.onnx"
    small(seed=1).export(path, verbose=False)
    before = path.read_bytes()

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(onnx, "save_model", full_disk)
    with pytest.raises(OSError, match="No space left on device"):
        small(seed=2).export(path, verbose=False)
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["m.onnx"]
