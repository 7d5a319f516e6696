"""model.export(format="onnx") against predict: ONNX Runtime's outputs equal hpcnn's (tests/support/
export_engines.py says how equality is judged) at batch 1 and 64, for every model of
hpcnn.applications (their logits, and as they come), a functional model with every layer rule,
augmentation, nested models and the models Keras saved; the file passes ONNX's full check and
has Keras' input (channels-last, any batch) and names."""
import numpy as np
import pytest

import hpcnn
from hpcnn.layers import Conv2D, Dense, Flatten, Input
from tests.support import export_models, live_keras, paths
from tests.support.export_engines import assert_same, engine, images, onnxruntime_predict

ENGINES = ("onnx", "onnxruntime")


@pytest.fixture(autouse=True)
def engines():
    """Skipped with the reason without the packages (an error under HPCNN_EXPECT_EXPORT=1)."""
    for name in ENGINES:
        engine(name)


def export_onnx(model, tmp_path, **kwargs):
    path = tmp_path / "model.onnx"
    model.export(path, format="onnx", verbose=False, **kwargs)
    return path


@pytest.mark.parametrize("name", sorted(export_models.MODELS))
def test_onnx_runtime_predicts_what_hpcnn_predicts(name, tmp_path):
    model = export_models.MODELS[name]()
    path = export_onnx(model, tmp_path)
    for batch in (1, 64):
        x = images(model.sample_shape, batch, seed=batch)
        assert_same(onnxruntime_predict(path, x), model.predict(x, batch_size=64), f"{name}, batch {batch}")


@pytest.mark.parametrize("name", export_models.KERAS_FILES)
def test_a_keras_saved_model_exports_and_predicts_as_keras_did(name, tmp_path):
    """A Keras user without TensorFlow: the file Keras saved -> hpcnn -> ONNX, which predicts what
    hpcnn predicts and what Keras predicted when it saved the file (tests/data/keras)."""
    model = export_models.keras_file(name)
    path = export_onnx(model, tmp_path)
    for batch in (1, 64):
        x = images(model.sample_shape, batch, seed=batch)
        assert_same(onnxruntime_predict(path, x), model.predict(x, batch_size=64), f"{name}, batch {batch}")
    family = "k3" if name.startswith("k3") else "tfk2"
    expected = np.load(paths.KERAS_DATA / f"expected_{family}{'_func' if 'resblock' in name else ''}.npz")
    x, key = (expected["x_mnist"], "mnist") if "recognition" in name else (expected["x_cnn"], None)
    key = key or ("resblock" if "resblock" in name else "bn" if "_bn" in name else "cnn")
    assert np.abs(onnxruntime_predict(path, x) - expected[key]).max() <= 1e-5  # as hpcnn's own fixture test


def test_the_file_passes_the_full_check_with_keras_input_and_names(tmp_path):
    onnx = engine("onnx")
    path = export_onnx(hpcnn.applications.tutorial_cnn(seed=1), tmp_path)
    proto = onnx.load(path)
    onnx.checker.check_model(proto, full_check=True)
    dims = lambda v: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]  # noqa: E731
    (inp,), (out,) = proto.graph.input, proto.graph.output
    assert (inp.name, dims(inp), out.name, dims(out)) == ("input_layer", ["batch", 32, 32, 3], "output_0", ["batch", 10])
    assert proto.opset_import[0].version == 18 and proto.producer_name == "hpcnn"
    # one transpose to channels-first after the input, one back before Flatten; nodes named by layer
    ops = [n.op_type for n in proto.graph.node]
    assert ops.count("Transpose") == 2 and "conv2d/Conv" in [n.name for n in proto.graph.node]
    assert "Dropout" not in ops  # gone at inference


def test_a_functional_models_input_keeps_its_name(tmp_path):
    ort = engine("onnxruntime")
    model = export_models.every_layer()
    session = ort.InferenceSession(str(export_onnx(model, tmp_path)), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["pixels"]


@pytest.mark.parametrize("opset", [13, 18, 21])
@pytest.mark.parametrize("activation", sorted(set(hpcnn.layers.arguments.ACTIVATIONS)))
def test_every_activation_at_old_and_new_opsets(activation, opset, tmp_path):
    """Gelu (opset 20) and Mish (18) are ONNX operators from those opsets; older opsets get their formulas."""
    x = Input(shape=(5, 5, 4))
    y = Conv2D(6, 3, activation=activation)(x)
    model = hpcnn.Model(x, Dense(4, activation=activation)(Flatten()(y)), seed=7)
    path = export_onnx(model, tmp_path, opset_version=opset)
    inputs = 3 * images((5, 5, 4), 64)
    assert_same(onnxruntime_predict(path, inputs), model.predict(inputs), f"{activation} at opset {opset}")


def test_a_fixed_batch_size_and_input_name_from_input_signature(tmp_path):
    onnx = engine("onnx")
    model = hpcnn.applications.deep_mnist(seed=1)
    spec = Input(shape=(28, 28, 1), batch_size=8, name="digits")
    path = export_onnx(model, tmp_path, input_signature=[spec])
    (inp,) = onnx.load(path).graph.input
    assert inp.name == "digits"
    assert [d.dim_value for d in inp.type.tensor_type.shape.dim] == [0, 28, 28, 1]  # hpcnn's Input: any batch
    class Spec:  # keras.InputSpec's and tf.TensorSpec's attributes
        shape, dtype, name = (8, 28, 28, 1), "float32", "digits"
    path = export_onnx(model, tmp_path, input_signature=Spec())
    (inp,) = onnx.load(path).graph.input
    assert [d.dim_value for d in inp.type.tensor_type.shape.dim] == [8, 28, 28, 1]
    x = images((28, 28, 1), 8)
    assert_same(onnxruntime_predict(path, x), model.predict(x), "fixed batch 8")


def test_a_keras_input_spec_as_input_signature(tmp_path):
    keras = live_keras.keras_or_skip()
    onnx = engine("onnx")
    spec = keras.InputSpec(shape=(None, 28, 28, 1), dtype="float32", name="digits")
    path = export_onnx(hpcnn.applications.deep_mnist(seed=1), tmp_path, input_signature=[spec])
    (inp,) = onnx.load(path).graph.input
    assert inp.name == "digits" and inp.type.tensor_type.shape.dim[0].dim_param == "batch"


def test_a_uint8_input_stays_uint8(tmp_path):
    x = Input(shape=(6, 6, 1), dtype="uint8")
    model = hpcnn.Model(x, Dense(3)(Flatten()(Conv2D(2, 3)(hpcnn.layers.Rescaling(1 / 255)(x)))), seed=1)
    path = export_onnx(model, tmp_path)
    pixels = np.random.default_rng(0).integers(0, 256, (4, 6, 6, 1), dtype=np.uint8)
    assert_same(onnxruntime_predict(path, pixels), model.predict(pixels.astype(np.float32)), "uint8 input")


def test_onnx_runtime_folds_the_batch_normalization_it_is_given(tmp_path):
    """The file keeps BatchNormalization as ONNX's operator (onnx_layers.py says why); ONNX Runtime
    folds it into the convolutions when it loads the model (its basic graph optimizations)."""
    ort = engine("onnxruntime")
    onnx = engine("onnx")
    model = hpcnn.applications.resnet20_cifar(seed=1)
    path = export_onnx(model, tmp_path)
    assert [n.op_type for n in onnx.load(path).graph.node].count("BatchNormalization") == 19
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    assert "BatchNormalization" not in [n.op_type for n in onnx.load(tmp_path / "optimized.onnx").graph.node]


def test_verbose_says_where_the_file_went(tmp_path, capsys):
    model = hpcnn.applications.tutorial_cnn(seed=1)
    model.export(tmp_path / "m.onnx")
    assert capsys.readouterr().out == f"Saved artifact at '{tmp_path / 'm.onnx'}'.\n"
    model.export(str(tmp_path / "m.onnx"), verbose=False)
    assert capsys.readouterr().out == ""
