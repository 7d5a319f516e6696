"""A model trained on the GPU exports the weights it has there (model.export reads them through
get_weights, from the device): ONNX Runtime then predicts what the model predicts once moved to the
CPU. HPCNN_TEST_GPU=cpu runs it with the CPU standing in for the GPU."""
import numpy as np

import hpcnn
from tests.support.export_engines import assert_same, engine, images, onnxruntime_predict, randomize
from tests.support.gpu_target import GPU, MARKS

pytestmark = MARKS


def test_a_model_trained_on_the_gpu_exports_its_new_weights(tmp_path):
    engine("onnx")
    engine("onnxruntime")
    model = hpcnn.applications.resnet20_cifar(seed=1, classifier_activation=None)
    randomize(model)
    x = images((32, 32, 3), 16)
    model.compile("sgd", hpcnn.losses.CategoricalCrossentropy(from_logits=True), device=GPU)
    before = model.get_weights()
    model.train_on_batch(x, np.eye(10, dtype=np.float32)[np.arange(16) % 10])  # weights and BN statistics move
    assert not np.allclose(before[0], model.get_weights()[0])
    model.export(tmp_path / "m.onnx", verbose=False)
    want = model.to("cpu").predict(x)
    assert_same(onnxruntime_predict(tmp_path / "m.onnx", x), want, f"exported from {GPU}")
