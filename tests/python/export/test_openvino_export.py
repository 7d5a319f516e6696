"""model.export(format="openvino"): OpenVINO's IR (.xml and .bin) converted by OpenVINO from the
ONNX graph, run by OpenVINO on the CPU in float32, predicts what hpcnn predicts (tests/support/
export_engines.py) at batch 1 and 64."""
import pytest

from tests.support import export_models
from tests.support.export_engines import assert_same, engine, images, openvino_predict

ENGINES = ("onnx", "openvino")

MODELS = ["tutorial_cnn", "tutorial_cnn_logits", "resnet20_cifar_logits", "resnet56_cifar_logits", "every_layer",
          "separable_variants", "nested_functional"]


@pytest.fixture(autouse=True)
def engines():
    """Skipped with the reason without the packages (an error under HPCNN_EXPECT_EXPORT=1)."""
    for name in ENGINES:
        engine(name)


@pytest.mark.parametrize("name", MODELS)
def test_openvino_predicts_what_hpcnn_predicts(name, tmp_path):
    model = export_models.MODELS[name]()
    xml = tmp_path / "model.xml"
    model.export(xml, format="openvino", verbose=False)
    assert (tmp_path / "model.bin").stat().st_size > 4 * model.count_params() * 0.9  # float32 weights, not float16
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.bin", "model.xml"]  # no temporary left
    for batch in (1, 64):
        x = images(model.sample_shape, batch, seed=batch)
        assert_same(openvino_predict(xml, x), model.predict(x, batch_size=64), f"{name}, batch {batch}")


def test_the_ir_has_keras_input_and_any_batch(tmp_path, capsys):
    ov = engine("openvino")
    model = export_models.MODELS["tutorial_cnn"]()
    model.export(str(tmp_path / "m.xml"), format="openvino")
    assert capsys.readouterr().out == f"Saved OpenVINO IR at '{tmp_path / 'm.xml'}'.\n"
    ir = ov.Core().read_model(str(tmp_path / "m.xml"))
    (inp,), (out,) = ir.inputs, ir.outputs
    assert inp.get_any_name() == "input_layer" and str(inp.get_partial_shape()) == "[?,32,32,3]"
    assert "output_0" in out.get_names() and str(out.get_partial_shape()) == "[?,10]"
