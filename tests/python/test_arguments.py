"""Every public argument is checked (issue 12, items 7-9): a wrong value is a ValueError (TypeError
for a keyword nobody takes) naming the argument and the value, with Keras' wording where Keras has
one; never a silent conversion, a default substituted, a pybind11 cast error or a model built
with the wrong size. Table-driven: one row per misuse."""
import numpy as np
import pytest

import hpcnn
from hpcnn import applications, callbacks, optimizers, regularizers
from hpcnn.optimizers import schedules
from hpcnn.data import HDF5Dataset, write_hdf5
from hpcnn.layers import (ELU, Activation, Add, AveragePooling2D, BatchNormalization, Concatenate, Conv2D, Dense,
                          Dropout, Flatten, GlobalAveragePooling2D, GlobalMaxPooling2D, Input, InputLayer, LeakyReLU,
                          MaxPooling2D, RandomCrop, RandomFlip, RandomTranslation, ReLU, Rescaling, Softmax,
                          ZeroPadding2D)
from hpcnn.utils import set_random_seed, to_categorical
from tests.support.small_models import small_model


def data(n=32, classes=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((n, 8, 8, 2), dtype=np.float32), rng.integers(0, classes, n)


class MySchedule(schedules.LearningRateSchedule):
    """A schedule with a __call__ of its own: the core cannot run it."""

    def __call__(self, step):
        return 0.1

    def get_config(self):
        return {}


class Ctx:
    """What the table's rows call: a compiled model, arrays and an HDF5 file."""

    def __init__(self, tmp_path):
        self.x, self.y = data()
        self.model = small_model()
        self.model.compile("adam", "sparse_categorical_crossentropy", ["accuracy"])
        self.h5 = str(tmp_path / "d.h5")
        write_hdf5(self.h5, {"x": self.x, "y": self.y})

    def fit(self, **kw):
        kw.setdefault("verbose", 0)
        return self.model.fit(self.x, self.y, **kw)

    def ds(self, **kw):
        return HDF5Dataset(self.h5, x="x", y="y", **kw)

    def sigmoid_model(self):
        return hpcnn.Sequential([InputLayer(input_shape=(8, 8, 2)), Flatten(), Dense(1, activation="sigmoid")])

    def scheduled(self):
        """The model compiled with an optimizer whose rate follows a schedule."""
        self.model.compile(optimizers.SGD(schedules.CosineDecay(0.1, 100)), "sparse_categorical_crossentropy")
        return self.model


def invalid(name, value):
    """Keras' 'Invalid value for argument `name`. ... Received: name=value' message."""
    return rf"Invalid value for argument `{name}`\..*Received: {name}={value}"


V, T = ValueError, TypeError


def _chain(**kw):
    x = Input((4,))
    return hpcnn.Model(x, Dense(2, activation="softmax")(x), **kw)


CASES = [
    # ---------------------------------------------------------------- fit (issue: batch_size=0 became 32,
    # 16.7 became 16, steps_per_epoch=-1 ran an empty epoch)
    ("fit batch_size=0", lambda c: c.fit(batch_size=0), V, invalid("batch_size", "0")),
    ("fit batch_size=16.7", lambda c: c.fit(batch_size=16.7), V, invalid("batch_size", "16.7")),
    ("fit batch_size=16.0", lambda c: c.fit(batch_size=16.0), V, invalid("batch_size", "16.0")),
    ("fit batch_size=-5", lambda c: c.fit(batch_size=-5), V, invalid("batch_size", "-5")),
    ("fit batch_size=True", lambda c: c.fit(batch_size=True), V, invalid("batch_size", "True")),
    ("fit batch_size='32'", lambda c: c.fit(batch_size="32"), V, invalid("batch_size", "'32'")),
    ("fit batch_size=2**31", lambda c: c.fit(batch_size=2**31), V, invalid("batch_size", "2147483648")),
    ("fit steps_per_epoch=-1", lambda c: c.fit(steps_per_epoch=-1), V, invalid("steps_per_epoch", "-1")),
    ("fit steps_per_epoch=0", lambda c: c.fit(steps_per_epoch=0), V, invalid("steps_per_epoch", "0")),
    ("fit steps_per_epoch=1.5", lambda c: c.fit(steps_per_epoch=1.5), V, invalid("steps_per_epoch", "1.5")),
    ("fit epochs=-1", lambda c: c.fit(epochs=-1), V, invalid("epochs", "-1")),
    ("fit epochs=2.5", lambda c: c.fit(epochs=2.5), V, invalid("epochs", "2.5")),
    ("fit epochs=None", lambda c: c.fit(epochs=None), V, invalid("epochs", "None")),
    ("fit initial_epoch=-1", lambda c: c.fit(initial_epoch=-1), V, invalid("initial_epoch", "-1")),
    ("fit epochs<initial_epoch", lambda c: c.fit(epochs=1, initial_epoch=2), V, r"epochs \(1\) must be >= initial"),
    ("fit validation_split=1.5", lambda c: c.fit(validation_split=1.5), V, invalid("validation_split", "1.5")),
    ("fit validation_split=1", lambda c: c.fit(validation_split=1.0), V, invalid("validation_split", "1.0")),
    ("fit validation_split=-0.1", lambda c: c.fit(validation_split=-0.1), V, invalid("validation_split", "-0.1")),
    ("fit validation_split=nan", lambda c: c.fit(validation_split=float("nan")), V, invalid("validation_split", "nan")),
    ("fit validation_split of 1 sample", lambda c: c.model.fit(c.x[:1], c.y[:1], validation_split=0.5, verbose=0), V,
     r"Training data contains 1 samples, which is not sufficient to split"),
    ("fit validation_split with a dataset", lambda c: c.model.fit(c.ds(), validation_split=0.2, verbose=0), V,
     r"`validation_split` is only supported for NumPy arrays"),
    ("fit batch_size with a dataset", lambda c: c.model.fit(c.ds(), batch_size=8, verbose=0), V,
     r"`batch_size` argument must not be specified"),
    ("fit validation_freq=0", lambda c: c.fit(validation_freq=0), V, invalid("validation_freq", "0")),
    ("fit validation_batch_size=0", lambda c: c.fit(validation_split=0.5, validation_batch_size=0), V,
     invalid("validation_batch_size", "0")),
    ("fit verbose=3", lambda c: c.fit(verbose=3), V, invalid("verbose", "3")),
    ("fit verbose=1.5", lambda c: c.fit(verbose=1.5), V, invalid("verbose", "1.5")),
    ("fit verbose='2'", lambda c: c.fit(verbose="2"), V, invalid("verbose", "'2'")),
    ("fit shuffle='batch'", lambda c: c.fit(shuffle="batch"), V, invalid("shuffle", "'batch'")),
    ("fit callbacks=callable", lambda c: c.fit(callbacks=[print]), V, r"callbacks must be hpcnn.callbacks.Callback"),
    ("fit callbacks='x'", lambda c: c.fit(callbacks="x"), V, r"callbacks must be a list"),
    ("fit validation_data=array", lambda c: c.fit(validation_data=c.x), V, r"validation_data must be a tuple"),
    ("fit validation_data with negative sample_weight", lambda c: c.fit(validation_data=(c.x, c.y, -np.ones(32))), V,
     r"validation_data's sample_weight must be finite numbers >= 0; row 0"),
    ("fit validation_data bad labels", lambda c: c.fit(validation_data=(c.x, c.y + 5)), V, r"label \d+ \(row 0\)"),
    ("fit sample_weight wrong length", lambda c: c.fit(sample_weight=np.ones(31)), V,
     r"sample_weight must have shape \(32,\)"),
    ("fit sample_weight NaN", lambda c: c.fit(sample_weight=np.r_[np.ones(31), np.nan]), V,
     r"sample_weight must be finite numbers >= 0; row 31"),
    ("fit sample_weight strings", lambda c: c.fit(sample_weight=np.array(["a"] * 32)), V, r"sample_weight has dtype"),
    ("fit sample_weight with a dataset", lambda c: c.model.fit(c.ds(batch_size=8), sample_weight=np.ones(32),
                                                               verbose=0), V,
     r"`sample_weight` argument is not supported when x is a dataset"),
    ("fit class_weight=list", lambda c: c.fit(class_weight=[1.0, 2.0]), V, r"class_weight must be a dict"),
    ("fit class_weight key 7", lambda c: c.fit(class_weight={7: 1.0}), V, r"class_weight has the key 7"),
    ("fit class_weight key '0'", lambda c: c.fit(class_weight={"0": 1.0}), V, r"class_weight has the key '0'"),
    ("fit class_weight value -1", lambda c: c.fit(class_weight={0: -1.0}), V,
     invalid(r"class_weight\[0\]", "-1.0")),
    ("fit class_weight and sample_weight", lambda c: c.fit(class_weight={0: 2.0}, sample_weight=np.ones(32)), V,
     r"cannot use `class_weight` and `sample_weight` at the same time"),
    ("fit validation_steps=0", lambda c: c.fit(validation_steps=0), V, invalid("validation_steps", "0")),
    ("fit generator without steps_per_epoch", lambda c: c.model.fit(iter([(c.x, c.y)]), verbose=0), V,
     r"a Python generator has no length: pass steps_per_epoch"),
    ("fit generator validation without validation_steps",
     lambda c: c.model.fit(c.x, c.y, validation_data=iter([(c.x, c.y)]), verbose=0), V,
     r"pass validation_steps"),
    ("fit unknown keyword", lambda c: c.fit(batchsize=8), T, r"Unrecognized keyword arguments passed to fit"),
    # ---------------------------------------------------------------- evaluate / predict / *_on_batch
    ("evaluate batch_size=0", lambda c: c.model.evaluate(c.x, c.y, batch_size=0), V, invalid("batch_size", "0")),
    ("evaluate batch_size=2.5", lambda c: c.model.evaluate(c.x, c.y, batch_size=2.5), V, invalid("batch_size", "2.5")),
    ("evaluate steps=0", lambda c: c.model.evaluate(c.x, c.y, steps=0), V, invalid("steps", "0")),
    ("evaluate verbose=7", lambda c: c.model.evaluate(c.x, c.y, verbose=7), V, invalid("verbose", "7")),
    ("evaluate return_dict='yes'", lambda c: c.model.evaluate(c.x, c.y, return_dict="yes"), V,
     invalid("return_dict", "'yes'")),
    ("evaluate callbacks", lambda c: c.model.evaluate(c.x, c.y, callbacks=[callbacks.Callback()]), V,
     r"evaluate: callbacks are not supported"),
    ("evaluate sample_weight wrong shape", lambda c: c.model.evaluate(c.x, c.y, sample_weight=np.ones((32, 2))), V,
     r"evaluate: sample_weight must have shape \(32,\)"),
    ("evaluate sample_weight inf", lambda c: c.model.evaluate(c.x, c.y, sample_weight=np.full(32, np.inf)), V,
     r"sample_weight must be finite numbers >= 0"),
    ("evaluate generator without steps", lambda c: c.model.evaluate(iter([(c.x, c.y)])), V,
     r"pass steps=\.\.\."),
    ("evaluate unknown keyword", lambda c: c.model.evaluate(c.x, c.y, workers=2), T,
     r"Unrecognized keyword arguments passed to evaluate"),
    ("evaluate batch_size with a dataset", lambda c: c.model.evaluate(c.ds(), batch_size=4), V,
     r"`batch_size` argument must not be specified"),
    ("predict batch_size=0", lambda c: c.model.predict(c.x, batch_size=0), V, invalid("batch_size", "0")),
    ("predict batch_size=-1", lambda c: c.model.predict(c.x, batch_size=-1), V, invalid("batch_size", "-1")),
    ("predict steps=-2", lambda c: c.model.predict(c.x, steps=-2), V, invalid("steps", "-2")),
    ("predict verbose='loud'", lambda c: c.model.predict(c.x, verbose="loud"), V, invalid("verbose", "'loud'")),
    ("predict callbacks", lambda c: c.model.predict(c.x, callbacks=[callbacks.Callback()]), V,
     r"predict: callbacks are not supported"),
    ("predict unknown keyword", lambda c: c.model.predict(c.x, use_multiprocessing=True), T,
     r"Unrecognized keyword arguments passed to predict"),
    ("predict_classes batch_size=0", lambda c: c.model.predict_classes(c.x, batch_size=0), V,
     invalid("batch_size", "0")),
    ("train_on_batch return_dict=2", lambda c: c.model.train_on_batch(c.x, c.y, return_dict=2), V,
     invalid("return_dict", "2")),
    ("train_on_batch sample_weight wrong length", lambda c: c.model.train_on_batch(c.x, c.y, sample_weight=[1.0]), V,
     r"train_on_batch: sample_weight must have shape \(32,\)"),
    ("train_on_batch class_weight key", lambda c: c.model.train_on_batch(c.x, c.y, class_weight={-1: 1.0}), V,
     r"class_weight has the key -1"),
    ("test_on_batch sample_weight negative", lambda c: c.model.test_on_batch(c.x, c.y, sample_weight=-np.ones(32)), V,
     r"sample_weight must be finite numbers >= 0"),
    ("test_on_batch return_dict=None", lambda c: c.model.test_on_batch(c.x, c.y, return_dict=None), V,
     invalid("return_dict", "None")),
    # ---------------------------------------------------------------- compile
    ("compile unknown optimizer", lambda c: c.model.compile("adagrad", "categorical_crossentropy"), V,
     r"unknown optimizer 'adagrad'"),
    ("compile optimizer=3", lambda c: c.model.compile(3, "categorical_crossentropy"), V, r"unknown optimizer 3"),
    ("compile no loss", lambda c: c.model.compile("adam"), V, r"a loss is required"),
    ("compile unknown loss", lambda c: c.model.compile("adam", "hinge"), V, r"unknown loss 'hinge'"),
    ("compile custom loss function", lambda c: c.model.compile("adam", lambda t, p: (t - p) ** 2), V,
     r"custom loss functions are not supported"),
    ("compile mse metric with sparse labels", lambda c: c.model.compile("adam", "sparse_categorical_crossentropy",
                                                                       ["mse"]), V,
     r"the metric 'mse' compares the outputs with targets of their shape"),
    ("compile sparse_categorical_accuracy with one-hot", lambda c: c.model.compile(
        "adam", "categorical_crossentropy", ["sparse_categorical_accuracy"]), V, r"needs class indices"),
    ("compile metric names twice", lambda c: c.model.compile("adam", "categorical_crossentropy", ["mae", "mae"]), V,
     r"the metric name 'mae' is used twice"),
    ("compile binary_crossentropy from_logits with sigmoid", lambda c: c.sigmoid_model().compile(
        "adam", hpcnn.losses.BinaryCrossentropy(from_logits=True)), V, r"already applies sigmoid"),
    ("BinaryCrossentropy label_smoothing=2", lambda c: hpcnn.losses.BinaryCrossentropy(label_smoothing=2), V,
     invalid("label_smoothing", "2")),
    ("CategoricalCrossentropy label_smoothing=-0.1",
     lambda c: hpcnn.losses.CategoricalCrossentropy(label_smoothing=-0.1), V, invalid("label_smoothing", "-0.1")),
    ("SparseCategoricalCrossentropy from_logits='yes'",
     lambda c: hpcnn.losses.SparseCategoricalCrossentropy(from_logits="yes"), V, invalid("from_logits", "'yes'")),
    ("MeanSquaredError reduction='sum'", lambda c: hpcnn.losses.MeanSquaredError(reduction="sum"), V,
     r"only reduction='sum_over_batch_size'"),
    ("TopKCategoricalAccuracy k=0", lambda c: hpcnn.metrics.TopKCategoricalAccuracy(k=0), V, invalid("k", "0")),
    ("BinaryAccuracy threshold='x'", lambda c: hpcnn.metrics.BinaryAccuracy(threshold="x"), V,
     invalid("threshold", "'x'")),
    ("CategoricalAccuracy dtype='float16'", lambda c: hpcnn.metrics.CategoricalAccuracy(dtype="float16"), V,
     r"only dtype='float32'"),
    ("PyDataset workers=0", lambda c: hpcnn.utils.PyDataset(workers=0), V, invalid("workers", "0")),
    ("PyDataset use_multiprocessing='no'", lambda c: hpcnn.utils.PyDataset(use_multiprocessing="no"), V,
     invalid("use_multiprocessing", "'no'")),
    ("compile metrics='accuracy'", lambda c: c.model.compile("adam", "categorical_crossentropy", metrics="accuracy"),
     V, r"metrics must be a list"),
    ("compile unknown metric", lambda c: c.model.compile("adam", "categorical_crossentropy", ["auc"]), V,
     r"unknown metric 'auc'"),
    ("compile loss_weights", lambda c: c.model.compile("adam", "categorical_crossentropy", loss_weights=[2.0]), V,
     r"loss_weights is not supported"),
    ("compile weighted_metrics", lambda c: c.model.compile("adam", "categorical_crossentropy",
                                                           weighted_metrics=["accuracy"]), V,
     r"weighted_metrics is not supported"),
    ("compile steps_per_execution=0", lambda c: c.model.compile("adam", "categorical_crossentropy",
                                                                steps_per_execution=0), V,
     invalid("steps_per_execution", "0")),
    ("compile run_eagerly='no'", lambda c: c.model.compile("adam", "categorical_crossentropy", run_eagerly="no"), V,
     invalid("run_eagerly", "'no'")),
    ("compile unknown keyword", lambda c: c.model.compile("adam", "categorical_crossentropy", lr=0.1), T,
     r"Unrecognized keyword arguments passed to compile"),
    ("compile device=0", lambda c: c.model.compile("adam", "categorical_crossentropy", device=0), V,
     r"device must be a string"),
    # ---------------------------------------------------------------- layers (Dense(2**31) was a pybind11 cast error)
    ("Dense(2**31)", lambda c: Dense(2**31), V,
     r"Received an invalid value for `units`, expected a positive integer.*Received: units=2147483648"),
    ("Dense(0)", lambda c: Dense(0), V, r"invalid value for `units`.*Received: units=0"),
    ("Dense(-3)", lambda c: Dense(-3), V, r"invalid value for `units`.*Received: units=-3"),
    ("Dense(10.5)", lambda c: Dense(10.5), V, r"invalid value for `units`.*Received: units=10.5"),
    ("Dense('10')", lambda c: Dense("10"), V, r"invalid value for `units`.*Received: units='10'"),
    ("Dense(True)", lambda c: Dense(True), V, r"invalid value for `units`.*Received: units=True"),
    ("Dense activation", lambda c: Dense(3, activation="tanhh"), V, r"unknown activation 'tanhh'"),
    ("Dense activation=3", lambda c: Dense(3, activation=3), V, r"unknown activation 3"),
    ("Dense use_bias='no'", lambda c: Dense(3, use_bias="no"), V, invalid("use_bias", "'no'")),
    ("Dense kernel_initializer", lambda c: Dense(3, kernel_initializer="he_normal"), V, r"initializers"),
    ("Dense kernel_regularizer='l3'", lambda c: Dense(3, kernel_regularizer="l3"), V,
     r"Could not interpret regularizer identifier: 'l3' \(for `kernel_regularizer`\)"),
    ("Dense kernel_regularizer=0.01", lambda c: Dense(3, kernel_regularizer=0.01), V,
     r"Could not interpret regularizer identifier: 0.01"),
    ("Dense bias_regularizer=dict", lambda c: Dense(3, bias_regularizer={"class_name": "L3", "config": {}}), V,
     r"unknown regularizer 'L3'"),
    ("Dense activity_regularizer", lambda c: Dense(3, activity_regularizer="l2"), V,
     r"activity_regularizer='l2' is not supported"),
    ("Dense kernel_constraint", lambda c: Dense(3, kernel_constraint="max_norm"), V,
     r"kernel_constraint='max_norm' is not supported"),
    ("Dense name with /", lambda c: Dense(3, name="a/b"), V, r"Argument `name` must be a string and cannot contain"),
    ("Dense name=5", lambda c: Dense(3, name=5), V, r"Argument `name` must be a string"),
    ("Dense dtype", lambda c: Dense(3, dtype="float64"), V, r"compute in float32"),
    ("Dense trainable='no'", lambda c: Dense(3, trainable="no"), V, invalid("trainable", "'no'")),
    ("Dense input_shape=(0,)", lambda c: Dense(3, input_shape=(0,)), V, invalid("input_shape", r"\(0,\)")),
    ("Dense unknown keyword", lambda c: Dense(3, bias=True), T, r"Unrecognized keyword arguments passed to Dense"),
    ("Conv2D filters=0", lambda c: Conv2D(0, 3), V,
     r"Invalid value for argument `filters`\. Expected a strictly positive integer.*Received filters=0"),
    ("Conv2D filters=2**31", lambda c: Conv2D(2**31, 3), V, r"`filters`.*Received filters=2147483648"),
    ("Conv2D filters=3.5", lambda c: Conv2D(3.5, 3), V, r"`filters`.*Received filters=3.5"),
    ("Conv2D kernel_size=0", lambda c: Conv2D(4, 0), V,
     r"The `kernel_size` argument must be a tuple of 2 integers.*do not satisfy"),
    ("Conv2D kernel_size=(3,)", lambda c: Conv2D(4, (3,)), V, r"The `kernel_size` argument must be a tuple of 2"),
    ("Conv2D kernel_size=(3, 3, 3)", lambda c: Conv2D(4, (3, 3, 3)), V, r"`kernel_size` argument must be a tuple"),
    ("Conv2D kernel_size=(3, 2.5)", lambda c: Conv2D(4, (3, 2.5)), V, r"including element 2.5"),
    ("Conv2D kernel_size='3'", lambda c: Conv2D(4, "3"), V, r"`kernel_size` argument must be a tuple"),
    ("Conv2D kernel_size=2**31", lambda c: Conv2D(4, 2**31), V, r"`kernel_size`.*do not satisfy"),
    ("Conv2D strides=0", lambda c: Conv2D(4, 3, strides=0), V, r"The `strides` argument must be a tuple of 2"),
    ("Conv2D strides=(1, -1)", lambda c: Conv2D(4, 3, strides=(1, -1)), V, r"`strides`.*\[-1\]"),
    ("Conv2D padding", lambda c: Conv2D(4, 3, padding="full"), V, r"The `padding` argument must be one of"),
    ("Conv2D padding=None", lambda c: Conv2D(4, 3, padding=None), V, r"The `padding` argument"),
    ("Conv2D data_format", lambda c: Conv2D(4, 3, data_format="channels_first"), V, r"NHWC only"),
    ("Conv2D dilation_rate", lambda c: Conv2D(4, 3, dilation_rate=2), V, r"dilation_rate=2 is not supported"),
    ("Conv2D groups", lambda c: Conv2D(4, 3, groups=2), V, r"groups=2 is not supported"),
    ("Conv2D use_bias='yes'", lambda c: Conv2D(4, 3, use_bias="yes"), V, invalid("use_bias", "'yes'")),
    ("Conv2D activation", lambda c: Conv2D(4, 3, activation="gelus"), V, r"unknown activation 'gelus'"),
    ("Conv2D unknown keyword", lambda c: Conv2D(4, 3, stride=2), T, r"Unrecognized keyword arguments passed to Conv2D"),
    ("Conv2D kernel_regularizer=l2(-1)", lambda c: Conv2D(4, 3, kernel_regularizer=regularizers.l2(-1.0)), V,
     r"Invalid value for argument l2: expected a non-negative float\. Received: l2=-1.0"),
    ("Conv2D bias_regularizer='L4'", lambda c: Conv2D(4, 3, bias_regularizer="L4"), V,
     r"Could not interpret regularizer identifier: 'L4' \(for `bias_regularizer`\)"),
    # ---------------------------------------------------------------- regularizers
    ("L1(nan)", lambda c: regularizers.L1(float("nan")), V, r"Invalid value for argument l1.*Received: l1=nan"),
    ("L2('0.1')", lambda c: regularizers.L2("0.1"), V, r"Invalid value for argument l2.*Received: l2='0.1'"),
    ("L1L2(l1=-1)", lambda c: regularizers.L1L2(l1=-1), V, r"Invalid value for argument l1.*Received: l1=-1"),
    ("L1L2(l2=True)", lambda c: regularizers.L1L2(l2=True), V, r"Invalid value for argument l2.*Received: l2=True"),
    ("L2 unknown keyword", lambda c: regularizers.L2(l1=0.1), T, r"unexpected keyword argument 'l1'"),
    ("MaxPooling2D pool_size=0", lambda c: MaxPooling2D(0), V, r"The `pool_size` argument must be a tuple of 2"),
    ("MaxPooling2D pool_size=2.0", lambda c: MaxPooling2D(2.0), V, r"`pool_size` argument must be a tuple"),
    ("MaxPooling2D strides=0", lambda c: MaxPooling2D(2, strides=0), V, r"The `strides` argument"),
    ("MaxPooling2D padding", lambda c: MaxPooling2D(2, padding="causal"), V, r"The `padding` argument"),
    ("MaxPooling2D too big", lambda c: hpcnn.Sequential([InputLayer(input_shape=(1, 3, 2)),
                                                         MaxPooling2D(2)]).build(), V,
     r"MaxPooling2D: a 2x2 pool with 'valid' padding does not fit a 1x3 input"),
    ("Dropout rate=1.5", lambda c: Dropout(1.5), V,
     r"Invalid value for argument `rate`\. Expected a float value between 0 and 1.*Received: rate=1.5"),
    ("Dropout rate=1", lambda c: Dropout(1.0), V, r"`rate`.*Received: rate=1.0"),
    ("Dropout rate=-0.1", lambda c: Dropout(-0.1), V, r"`rate`.*Received: rate=-0.1"),
    ("Dropout rate='0.5'", lambda c: Dropout("0.5"), V, r"`rate`.*Received: rate='0.5'"),
    ("Dropout rate=nan", lambda c: Dropout(float("nan")), V, r"`rate`.*Received: rate=nan"),
    ("Dropout seed", lambda c: Dropout(0.5, seed=1), V, r"seed= is not supported.*model's seed"),
    ("Dropout noise_shape", lambda c: Dropout(0.5, noise_shape=(1, 4)), V,
     r"noise_shape must be None or a tuple.*received noise_shape=\(1, 4\)"),
    ("Activation", lambda c: Activation("gelux"), V, r"unknown activation 'gelux'"),
    ("ReLU max_value='6'", lambda c: ReLU(max_value="6"), V, invalid("max_value", "'6'")),
    ("ReLU max_value=-1", lambda c: ReLU(max_value=-1.0), V, invalid("max_value", "-1.0")),
    ("ReLU negative_slope=-1", lambda c: ReLU(negative_slope=-1), V, r"negative_slope value .* cannot be None or "
     r"negative.*Received: negative_slope=-1"),
    ("ReLU threshold=None", lambda c: ReLU(threshold=None), V, r"threshold of a ReLU layer cannot be None or a negative"),
    ("ReLU threshold=-1", lambda c: ReLU(threshold=-1.0), V, r"cannot be None or a negative value.*threshold=-1.0"),
    ("LeakyReLU negative_slope=-0.1", lambda c: LeakyReLU(-0.1), V, r"Received: negative_slope=-0.1"),
    ("LeakyReLU alpha=None", lambda c: LeakyReLU(alpha=None), V, r"Received: negative_slope=None"),
    ("LeakyReLU unknown keyword", lambda c: LeakyReLU(slope=0.1), T, r"Unrecognized keyword arguments passed to Leaky"),
    ("ELU alpha='1'", lambda c: ELU(alpha="1"), V, invalid("alpha", "'1'")),
    ("Softmax axis=1", lambda c: Softmax(axis=1), V, r"Softmax: axis=1 is not supported"),
    ("BatchNormalization momentum=1.5", lambda c: BatchNormalization(momentum=1.5), V, invalid("momentum", "1.5")),
    ("BatchNormalization momentum='0.9'", lambda c: BatchNormalization(momentum="0.9"), V,
     invalid("momentum", "'0.9'")),
    ("BatchNormalization epsilon=0", lambda c: BatchNormalization(epsilon=0), V, invalid("epsilon", "0")),
    ("BatchNormalization epsilon=nan", lambda c: BatchNormalization(epsilon=float("nan")), V, invalid("epsilon", "nan")),
    ("BatchNormalization center=2", lambda c: BatchNormalization(center=2), V, invalid("center", "2")),
    ("BatchNormalization scale=None", lambda c: BatchNormalization(scale=None), V, invalid("scale", "None")),
    ("BatchNormalization axis=1.5", lambda c: BatchNormalization(axis=1.5), V, r"`axis`. Expected an integer"),
    ("BatchNormalization axis=0", lambda c: BatchNormalization(axis=0), V, r"axis=0 is the batch axis"),
    ("BatchNormalization axis=-2", lambda c: BatchNormalization(axis=-2), V, invalid("axis", "-2")),
    ("BatchNormalization axis=1 at build", lambda c: hpcnn.Sequential([InputLayer(input_shape=(4, 4, 2)),
                                                                       BatchNormalization(axis=1)]).build(), V,
     r"axis=1 is not supported: hpcnn normalizes the last \(channels\) axis"),
    ("BatchNormalization synchronized", lambda c: BatchNormalization(synchronized=True), V,
     r"synchronized=True is not supported"),
    ("BatchNormalization gamma_initializer", lambda c: BatchNormalization(gamma_initializer="zeros"), V,
     r"only Keras' default gamma_initializer='ones'"),
    ("BatchNormalization gamma_regularizer", lambda c: BatchNormalization(gamma_regularizer="l2"), V,
     r"gamma_regularizer='l2' is not supported"),
    ("BatchNormalization renorm", lambda c: BatchNormalization(renorm=True), V, r"renorm=True is not supported"),
    ("BatchNormalization unknown keyword", lambda c: BatchNormalization(decay=0.9), T,
     r"Unrecognized keyword arguments passed to BatchNormalization"),
    ("AveragePooling2D pool_size=0", lambda c: AveragePooling2D(0), V, r"The `pool_size` argument must be a tuple"),
    ("AveragePooling2D strides=(1, 0)", lambda c: AveragePooling2D(2, strides=(1, 0)), V, r"The `strides` argument"),
    ("AveragePooling2D padding", lambda c: AveragePooling2D(2, padding="full"), V, r"The `padding` argument"),
    ("AveragePooling2D data_format", lambda c: AveragePooling2D(data_format="channels_first"), V, r"NHWC only"),
    ("AveragePooling2D too big", lambda c: hpcnn.Sequential([InputLayer(input_shape=(1, 3, 2)),
                                                             AveragePooling2D(2)]).build(), V,
     r"AveragePooling2D: a 2x2 pool with 'valid' padding does not fit a 1x3 input"),
    ("GlobalAveragePooling2D keepdims=2", lambda c: GlobalAveragePooling2D(keepdims=2), V, invalid("keepdims", "2")),
    ("GlobalAveragePooling2D data_format", lambda c: GlobalAveragePooling2D(data_format="channels_first"), V,
     r"NHWC only"),
    ("GlobalAveragePooling2D on a flat input", lambda c: hpcnn.Sequential([InputLayer(input_shape=(4,)),
                                                                           GlobalAveragePooling2D()]).build(), V,
     r"GlobalAveragePooling2D expects inputs of shape \(height, width, channels\)"),
    ("GlobalMaxPooling2D keepdims='yes'", lambda c: GlobalMaxPooling2D(keepdims="yes"), V,
     invalid("keepdims", "'yes'")),
    ("ZeroPadding2D padding=-1", lambda c: ZeroPadding2D(-1), V, r"`padding` should be either an int.*padding=-1"),
    ("ZeroPadding2D padding=(1, 2, 3)", lambda c: ZeroPadding2D((1, 2, 3)), V, r"`padding` should be either an int"),
    ("ZeroPadding2D padding=((1, 2), 1.5)", lambda c: ZeroPadding2D(((1, 2), 1.5)), V,
     r"`padding` should be either an int"),
    ("ZeroPadding2D padding='same'", lambda c: ZeroPadding2D("same"), V, r"`padding` should be either an int"),
    ("Rescaling scale='x'", lambda c: Rescaling("x"), V, r"Rescaling: Invalid value for argument `scale`"),
    ("Rescaling scale=inf", lambda c: Rescaling(float("inf")), V, r"`scale`.*Received: scale=inf"),
    ("Rescaling offset=[[1]]", lambda c: Rescaling(1.0, offset=[[1.0]]), V, r"`offset`"),
    ("Rescaling per-channel mismatch", lambda c: hpcnn.Sequential([InputLayer(input_shape=(2, 2, 3)),
                                                                   Rescaling([1.0, 2.0])]).build(), V,
     r"Rescaling: 2 scale values for 3 channels"),
    ("RandomFlip mode='diagonal'", lambda c: RandomFlip("diagonal"), V, r"RandomFlip.*unknown mode.*'diagonal'"),
    ("RandomFlip mode=None", lambda c: RandomFlip(None), V, r"RandomFlip.*unknown mode"),
    ("RandomFlip seed=-1", lambda c: RandomFlip(seed=-1), V, invalid("seed", "-1")),
    ("RandomFlip data_format", lambda c: RandomFlip(data_format="channels_first"), V, r"NHWC only"),
    ("RandomTranslation height_factor=1.5", lambda c: RandomTranslation(1.5, 0.1), V,
     r"RandomTranslation: The `factor` argument.*Received: height_factor=1.5"),
    ("RandomTranslation width_factor=(0.1,)", lambda c: RandomTranslation(0.1, (0.1,)), V,
     r"Received: width_factor=\(0.1,\)"),
    ("RandomTranslation width_factor='x'", lambda c: RandomTranslation(0.1, "x"), V, r"Received: width_factor='x'"),
    ("RandomTranslation height_factor=nan", lambda c: RandomTranslation(float("nan"), 0.1), V,
     r"Received: height_factor=nan"),
    ("RandomTranslation fill_mode='mirror'", lambda c: RandomTranslation(0.1, 0.1, fill_mode="mirror"), V,
     r"Unknown `fill_mode` 'mirror'"),
    ("RandomTranslation interpolation='bicubic'", lambda c: RandomTranslation(0.1, 0.1, interpolation="bicubic"), V,
     r"Unknown `interpolation` 'bicubic'"),
    ("RandomTranslation fill_value=inf", lambda c: RandomTranslation(0.1, 0.1, fill_value=float("inf")), V,
     r"`fill_value`.*Received: fill_value=inf"),
    ("RandomTranslation seed='1'", lambda c: RandomTranslation(0.1, 0.1, seed="1"), V, invalid("seed", "'1'")),
    ("RandomCrop height=0", lambda c: RandomCrop(0, 4), V, invalid("height", "0")),
    ("RandomCrop width=2.5", lambda c: RandomCrop(4, 2.5), V, invalid("width", "2.5")),
    ("RandomCrop larger than the input", lambda c: hpcnn.Sequential([InputLayer(input_shape=(4, 4, 1)),
                                                                     RandomCrop(5, 4)]).build(), V,
     r"RandomCrop\(5, 4\): the input is 4x4, smaller than the crop"),
    ("RandomFlip after Conv2D", lambda c: hpcnn.Sequential([InputLayer(input_shape=(4, 4, 1)), Conv2D(2, 1),
                                                            RandomFlip()]).build(), V,
     r"RandomFlip comes after Conv2D.*before every layer with weights"),
    ("RandomFlip on features", lambda c: hpcnn.Sequential([InputLayer(input_shape=(4,)), RandomFlip()]).build(), V,
     r"RandomFlip expects images of shape \(height, width, channels\)"),
    ("Flatten data_format", lambda c: Flatten(data_format="channels_first"), V, r"NHWC only"),
    ("InputLayer no shape", lambda c: InputLayer(), V, r"needs input_shape"),
    ("InputLayer shape=(0, 4)", lambda c: InputLayer(input_shape=(0, 4)), V, invalid("input_shape", r"\(0, 4\)")),
    ("InputLayer shape=(8.5,)", lambda c: InputLayer(input_shape=(8.5,)), V, invalid("input_shape", r"\(8.5,\)")),
    ("InputLayer shape=8", lambda c: InputLayer(input_shape=8), V, invalid("input_shape", "8")),
    ("InputLayer shape=(None, 4)", lambda c: InputLayer(input_shape=(None, 4)), V, invalid("input_shape", "")),
    ("InputLayer shape=(2**70,)", lambda c: InputLayer(input_shape=(2**70,)), V, invalid("input_shape", "")),
    ("InputLayer disagreeing shapes", lambda c: InputLayer(input_shape=(4,), shape=(5,)), V, r"disagree"),
    ("InputLayer batch_size=0", lambda c: InputLayer(input_shape=(4,), batch_size=0), V, invalid("batch_size", "0")),
    ("InputLayer dtype", lambda c: InputLayer(input_shape=(4,), dtype="int64"), V, r"dtype must be float32 or uint8"),
    ("InputLayer sparse", lambda c: InputLayer(input_shape=(4,), sparse=True), V, r"sparse inputs are not supported"),
    ("Input shape='x'", lambda c: Input(shape="x"), V, invalid("shape", "'x'")),
    ("Input batch_size=0", lambda c: Input((4,), batch_size=0), V, invalid("batch_size", "0")),
    ("Input dtype", lambda c: Input((4,), dtype="int64"), V, r"dtype must be float32 or uint8"),
    ("Input tensor", lambda c: Input((4,), tensor=np.zeros(4)), V, r"Input: tensor=.* is not supported"),
    ("Input unknown keyword", lambda c: Input((4,), ragged=True), T, r"Unrecognized keyword arguments"),
    ("Add input_shape", lambda c: Add(input_shape=(4,)), V, r"Add: input_shape= is not taken"),
    ("Add unknown keyword", lambda c: Add(axis=1), T, r"Unrecognized keyword arguments passed to Add"),
    ("Concatenate axis=1.5", lambda c: Concatenate(axis=1.5), V, invalid("axis", "1.5")),
    ("Concatenate axis='x'", lambda c: Concatenate(axis="x"), V, invalid("axis", "'x'")),
    ("Concatenate axis=0", lambda c: Concatenate(axis=0), V, invalid("axis", "0")),
    ("layer __call__ training", lambda c: Dense(2)(Input((4,)), training=False), V, r"training=False is not supported"),
    ("layer __call__ unknown keyword", lambda c: Dense(2)(Input((4,)), foo=1), T,
     r"Unrecognized keyword arguments passed to Dense.__call__"),
    # ---------------------------------------------------------------- Model (functional)
    ("Model inputs=3", lambda c: hpcnn.Model(3, Input((4,))), T, r"Model: inputs must be hpcnn tensors"),
    ("Model outputs list of 0", lambda c: hpcnn.Model(Input((4,)), []), V, r"Model: outputs is empty"),
    ("Model name=3", lambda c: _chain(name=3), V, r"Argument `name` must be a string"),
    ("Model seed=-1", lambda c: _chain(seed=-1), V, invalid("seed", "-1")),
    ("Model seed=1.5", lambda c: _chain(seed=1.5), V, invalid("seed", "1.5")),
    ("Model trainable=2", lambda c: _chain(trainable=2), V, invalid("trainable", "2")),
    ("Model unknown keyword", lambda c: _chain(inputs_shape=3), T, r"Unrecognized keyword arguments passed to Model"),
    ("get_layer neither", lambda c: c.model.get_layer(), V, r"provide either a name or an index"),
    ("get_layer index=1.5", lambda c: c.model.get_layer(index=1.5), V, invalid("index", "1.5")),
    ("get_layer index=99", lambda c: c.model.get_layer(index=99), V, r"index 99 but model only has 7 layers"),
    # ---------------------------------------------------------------- Sequential
    ("Sequential layers='x'", lambda c: hpcnn.Sequential("abc"), V, r"Sequential: layers: expected a list"),
    ("Sequential add(int)", lambda c: hpcnn.Sequential().add(3), T, r"add\(\) takes an hpcnn layer"),
    ("Sequential seed=-1", lambda c: hpcnn.Sequential(seed=-1), V, invalid("seed", "-1")),
    ("Sequential seed=2**64", lambda c: hpcnn.Sequential(seed=2**64), V, invalid("seed", str(2**64))),
    ("Sequential seed=1.5", lambda c: hpcnn.Sequential(seed=1.5), V, invalid("seed", "1.5")),
    ("Sequential name=3", lambda c: hpcnn.Sequential(name=3), V, r"Argument `name` must be a string"),
    ("Sequential trainable=2", lambda c: setattr(c.model, "trainable", 2), V, invalid("trainable", "2")),
    ("layer.trainable=None", lambda c: setattr(c.model.layers[0], "trainable", None), V, invalid("trainable", "None")),
    ("build input_shape=(0, 1)", lambda c: hpcnn.Sequential([Dense(2)]).build((None, 0, 1)), V,
     invalid("input_shape", "")),
    ("set_weights(array)", lambda c: c.model.set_weights(np.zeros(3)), V, r"expected a list of arrays"),
    ("set_weights strings", lambda c: c.model.set_weights([np.array(["a"])] * 8), V, r"has dtype <U1"),
    # ---------------------------------------------------------------- optimizers
    ("Adam learning_rate=0", lambda c: optimizers.Adam(0), V, invalid("learning_rate", "0")),
    ("Adam learning_rate=inf", lambda c: optimizers.Adam(float("inf")), V, invalid("learning_rate", "inf")),
    ("Adam learning_rate='1e-3'", lambda c: optimizers.Adam("1e-3"), V, invalid("learning_rate", "'1e-3'")),
    ("Adam beta_1=1", lambda c: optimizers.Adam(beta_1=1.0), V, invalid("beta_1", "1.0")),
    ("Adam beta_2=-0.1", lambda c: optimizers.Adam(beta_2=-0.1), V, invalid("beta_2", "-0.1")),
    ("Adam epsilon=0", lambda c: optimizers.Adam(epsilon=0.0), V, invalid("epsilon", "0.0")),
    ("Adam amsgrad", lambda c: optimizers.Adam(amsgrad=True), V, r"amsgrad=True\) is not supported"),
    ("Adam unknown keyword", lambda c: optimizers.Adam(lr=0.1), T, r"Unrecognized keyword arguments passed to Adam"),
    ("SGD momentum=1.5", lambda c: optimizers.SGD(momentum=1.5), V, invalid("momentum", "1.5")),
    ("SGD nesterov='yes'", lambda c: optimizers.SGD(nesterov="yes"), V, invalid("nesterov", "'yes'")),
    ("optimizer.learning_rate=-1", lambda c: setattr(optimizers.SGD(), "learning_rate", -1.0), V,
     invalid("learning_rate", "-1.0")),
    ("optimizer.learning_rate=nan", lambda c: setattr(optimizers.Adam(), "learning_rate", float("nan")), V,
     invalid("learning_rate", "nan")),
    ("SGD learning_rate=callable", lambda c: optimizers.SGD(learning_rate=lambda: 0.1), V,
     r"a callable learning_rate is not supported"),
    ("SGD learning_rate=custom schedule", lambda c: optimizers.SGD(learning_rate=MySchedule()), V,
     r"is a schedule the C\+\+ core cannot evaluate"),
    ("schedule optimizer.learning_rate=0.1", lambda c: setattr(optimizers.SGD(schedules.ExponentialDecay(0.1, 10, 0.9)),
                                                               "learning_rate", 0.1), T,
     r"created with a `LearningRateSchedule` object as its `learning_rate`.*not settable"),
    ("SGD weight_decay=-0.1", lambda c: optimizers.SGD(weight_decay=-0.1), V, invalid("weight_decay", "-0.1")),
    ("SGD weight_decay='0.1'", lambda c: optimizers.SGD(weight_decay="0.1"), V, invalid("weight_decay", "'0.1'")),
    ("Adam clipnorm=0", lambda c: optimizers.Adam(clipnorm=0.0), V, invalid("clipnorm", "0.0")),
    ("Adam clipvalue=-1", lambda c: optimizers.Adam(clipvalue=-1), V, invalid("clipvalue", "-1")),
    ("Adam global_clipnorm=inf", lambda c: optimizers.Adam(global_clipnorm=float("inf")), V,
     invalid("global_clipnorm", "inf")),
    ("Adam clipnorm and clipvalue", lambda c: optimizers.Adam(clipnorm=1.0, clipvalue=0.5), V,
     r"Only one of `clipnorm`, `clipvalue` and `global_clipnorm` can be set\. Received: clipnorm=1.0, clipvalue=0.5"),
    ("RMSprop clipnorm and global_clipnorm", lambda c: optimizers.RMSprop(clipnorm=1.0, global_clipnorm=2.0), V,
     r"Only one of `clipnorm`, `clipvalue` and `global_clipnorm`"),
    ("SGD use_ema=True", lambda c: optimizers.SGD(use_ema=True), V, r"use_ema=True is not supported"),
    ("Adam gradient_accumulation_steps", lambda c: optimizers.Adam(gradient_accumulation_steps=4), V,
     r"gradient_accumulation_steps=4 is not supported"),
    ("Adam loss_scale_factor", lambda c: optimizers.Adam(loss_scale_factor=128.0), V,
     r"loss_scale_factor=128.0 is not supported"),
    ("Adam ema_momentum=2", lambda c: optimizers.Adam(ema_momentum=2.0), V, invalid("ema_momentum", "2.0")),
    ("SGD name='a/b'", lambda c: optimizers.SGD(name="a/b"), V, r"Argument `name` must be a string"),
    ("RMSprop rho=1", lambda c: optimizers.RMSprop(rho=1.0), V, invalid("rho", "1.0")),
    ("RMSprop rho=-0.5", lambda c: optimizers.RMSprop(rho=-0.5), V, invalid("rho", "-0.5")),
    ("RMSprop momentum=1", lambda c: optimizers.RMSprop(momentum=1.0), V, invalid("momentum", "1.0")),
    ("RMSprop epsilon=0", lambda c: optimizers.RMSprop(epsilon=0.0), V, invalid("epsilon", "0.0")),
    ("RMSprop centered='yes'", lambda c: optimizers.RMSprop(centered="yes"), V, invalid("centered", "'yes'")),
    ("RMSprop unknown keyword", lambda c: optimizers.RMSprop(decay=0.9), T,
     r"Unrecognized keyword arguments passed to RMSprop"),
    ("AdamW weight_decay=None", lambda c: optimizers.AdamW(weight_decay=None), V,
     r"Argument `weight_decay` must be a float\. Received: weight_decay=None"),
    ("AdamW weight_decay=-1", lambda c: optimizers.AdamW(weight_decay=-1.0), V, invalid("weight_decay", "-1.0")),
    ("AdamW amsgrad", lambda c: optimizers.AdamW(amsgrad=True), V, r"AdamW\(amsgrad=True\) is not supported"),
    ("AdamW beta_1=1.5", lambda c: optimizers.AdamW(beta_1=1.5), V, invalid("beta_1", "1.5")),
    ("exclude_from_weight_decay var_list", lambda c: optimizers.AdamW().exclude_from_weight_decay(var_list=[1]), V,
     r"var_list is not supported"),
    ("exclude_from_weight_decay var_names='bias'",
     lambda c: optimizers.AdamW().exclude_from_weight_decay(var_names="bias"), V,
     r"var_names must be a list of non-empty strings"),
    ("exclude_from_weight_decay bad pattern",
     lambda c: optimizers.AdamW().exclude_from_weight_decay(var_names=["bias("]), V,
     r"'bias\(' is not a valid regular expression"),
    ("exclude_from_weight_decay after compile", lambda c: c.model.optimizer.exclude_from_weight_decay(var_names=["b"]),
     V, r"can only be configured before the optimizer is built"),
    ("optimizers.get('adagrad')", lambda c: optimizers.get("adagrad"), V, r"unknown optimizer 'adagrad'"),
    # ---------------------------------------------------------------- learning-rate schedules
    ("ExponentialDecay decay_steps=0", lambda c: schedules.ExponentialDecay(0.1, 0, 0.9), V,
     r"Argument `decay_steps` must be > 0\. Received: decay_steps=0"),
    ("ExponentialDecay decay_rate=-1", lambda c: schedules.ExponentialDecay(0.1, 10, -1.0), V,
     invalid("decay_rate", "-1.0")),
    ("ExponentialDecay initial_learning_rate='1'", lambda c: schedules.ExponentialDecay("1", 10, 0.9), V,
     invalid("initial_learning_rate", "'1'")),
    ("ExponentialDecay staircase=2", lambda c: schedules.ExponentialDecay(0.1, 10, 0.9, staircase=2), V,
     invalid("staircase", "2")),
    ("PiecewiseConstantDecay lengths", lambda c: schedules.PiecewiseConstantDecay([10, 20], [0.1, 0.01]), V,
     r"The length of boundaries should be 1 less than the length of values"),
    ("PiecewiseConstantDecay not increasing", lambda c: schedules.PiecewiseConstantDecay([20, 10], [1.0, 0.1, 0.01]),
     V, r"`boundaries` must be strictly increasing"),
    ("PiecewiseConstantDecay values='x'", lambda c: schedules.PiecewiseConstantDecay([10], "ab"), V,
     r"`values` must be a list of numbers"),
    ("PiecewiseConstantDecay negative value", lambda c: schedules.PiecewiseConstantDecay([10], [0.1, -0.1]), V,
     invalid("values", "-0.1")),
    ("PolynomialDecay power=nan", lambda c: schedules.PolynomialDecay(0.1, 10, power=float("nan")), V,
     invalid("power", "nan")),
    ("PolynomialDecay decay_steps=-5", lambda c: schedules.PolynomialDecay(0.1, -5), V,
     r"Argument `decay_steps` must be > 0\. Received: decay_steps=-5"),
    ("InverseTimeDecay decay_steps='10'", lambda c: schedules.InverseTimeDecay(0.1, "10", 0.5), V,
     r"Argument `decay_steps` must be > 0\. Received: decay_steps='10'"),
    ("CosineDecay alpha=-1", lambda c: schedules.CosineDecay(0.1, 100, alpha=-1.0), V, invalid("alpha", "-1.0")),
    ("CosineDecay warmup_steps=-1", lambda c: schedules.CosineDecay(0.0, 100, warmup_target=0.1, warmup_steps=-1), V,
     invalid("warmup_steps", "-1")),
    ("CosineDecay warmup_target=inf", lambda c: schedules.CosineDecay(0.0, 100, warmup_target=float("inf")), V,
     invalid("warmup_target", "inf")),
    ("CosineDecayRestarts t_mul=0", lambda c: schedules.CosineDecayRestarts(0.1, 100, t_mul=0.0), V,
     invalid("t_mul", "0.0")),
    ("CosineDecayRestarts first_decay_steps=0", lambda c: schedules.CosineDecayRestarts(0.1, 0), V,
     r"Argument `first_decay_steps` must be > 0"),
    ("schedule(step=-1)", lambda c: schedules.CosineDecay(0.1, 100)(-1), V, invalid("step", "-1")),
    ("schedule(step=1.5)", lambda c: schedules.CosineDecay(0.1, 100)(1.5), V, invalid("step", "1.5")),
    ("schedules.deserialize unknown", lambda c: schedules.deserialize({"class_name": "Cyclic", "config": {}}), V,
     r"unknown learning rate schedule 'Cyclic'"),
    # ---------------------------------------------------------------- callbacks
    ("EarlyStopping patience=-1", lambda c: callbacks.EarlyStopping(patience=-1), V, invalid("patience", "-1")),
    ("EarlyStopping patience=1.5", lambda c: callbacks.EarlyStopping(patience=1.5), V, invalid("patience", "1.5")),
    ("EarlyStopping mode", lambda c: callbacks.EarlyStopping(mode="up"), V,
     r"Unknown value for `mode` argument of EarlyStopping.*Received: mode='up'"),
    ("EarlyStopping min_delta", lambda c: callbacks.EarlyStopping(min_delta="0"), V, invalid("min_delta", "'0'")),
    ("EarlyStopping monitor", lambda c: callbacks.EarlyStopping(monitor=3), V, r"monitor must be a metric name"),
    ("EarlyStopping start_from_epoch=-1", lambda c: callbacks.EarlyStopping(start_from_epoch=-1), V,
     r"start_from_epoch"),
    ("EarlyStopping baseline", lambda c: callbacks.EarlyStopping(baseline="0.5"), V, r"baseline"),
    ("EarlyStopping verbose=-1", lambda c: callbacks.EarlyStopping(verbose=-1), V, r"verbose"),
    ("CSVLogger separator", lambda c: callbacks.CSVLogger("x.csv", separator=";;"), V, r"single character"),
    ("LambdaCallback not callable", lambda c: callbacks.LambdaCallback(on_batch_end=3), V,
     r"on_batch_end must be callable"),
    ("ModelCheckpoint filepath=None", lambda c: callbacks.ModelCheckpoint(None), V, r"filepath must be a file name"),
    ("ModelCheckpoint monitor=3", lambda c: callbacks.ModelCheckpoint("m.h5", monitor=3), V,
     r"monitor must be a metric name"),
    ("ModelCheckpoint verbose=3", lambda c: callbacks.ModelCheckpoint("m.h5", verbose=3), V, invalid("verbose", "3")),
    ("ModelCheckpoint save_best_only=2", lambda c: callbacks.ModelCheckpoint("m.h5", save_best_only=2), V,
     invalid("save_best_only", "2")),
    ("ModelCheckpoint save_weights_only='y'", lambda c: callbacks.ModelCheckpoint("m.h5", save_weights_only="y"), V,
     invalid("save_weights_only", "'y'")),
    ("ModelCheckpoint mode", lambda c: callbacks.ModelCheckpoint("m.h5", mode="best"), V,
     r"Unknown value for `mode` argument of ModelCheckpoint.*Received: mode='best'"),
    ("ModelCheckpoint save_freq=0", lambda c: callbacks.ModelCheckpoint("m.h5", save_freq=0), V,
     invalid("save_freq", "0")),
    ("ModelCheckpoint save_freq=2.5", lambda c: callbacks.ModelCheckpoint("m.h5", save_freq=2.5), V,
     invalid("save_freq", "2.5")),
    ("ModelCheckpoint initial_value_threshold", lambda c: callbacks.ModelCheckpoint(
        "m.h5", initial_value_threshold="0.5"), V, invalid("initial_value_threshold", "'0.5'")),
    ("ModelCheckpoint unknown keyword", lambda c: callbacks.ModelCheckpoint("m.h5", period=1), T,
     r"Unrecognized keyword arguments passed to ModelCheckpoint"),
    ("BackupAndRestore backup_dir=3", lambda c: callbacks.BackupAndRestore(3), V, r"backup_dir must be a directory"),
    ("BackupAndRestore save_freq=-1", lambda c: callbacks.BackupAndRestore("b", save_freq=-1), V,
     invalid("save_freq", "-1")),
    ("BackupAndRestore save_freq=True", lambda c: callbacks.BackupAndRestore("b", save_freq=True), V,
     invalid("save_freq", "True")),
    ("BackupAndRestore double_checkpoint", lambda c: callbacks.BackupAndRestore("b", double_checkpoint="y"), V,
     invalid("double_checkpoint", "'y'")),
    ("BackupAndRestore delete_checkpoint", lambda c: callbacks.BackupAndRestore("b", delete_checkpoint=None), V,
     invalid("delete_checkpoint", "None")),
    ("BackupAndRestore unknown keyword", lambda c: callbacks.BackupAndRestore("b", save_before_preemption=True), T,
     r"Unrecognized keyword arguments passed to BackupAndRestore"),
    # ---------------------------------------------------------------- model and weights files
    ("save include_optimizer='no'", lambda c: c.model.save("m.h5", include_optimizer="no"), V,
     invalid("include_optimizer", "'no'")),
    ("save overwrite=2", lambda c: c.model.save("m.h5", overwrite=2), V, invalid("overwrite", "2")),
    ("save_weights overwrite='y'", lambda c: c.model.save_weights("w.h5", overwrite="y"), V,
     invalid("overwrite", "'y'")),
    ("save_weights filepath=3", lambda c: c.model.save_weights(3), V, r"the file path must be a string"),
    ("load_weights filepath=3", lambda c: c.model.load_weights(3), V, r"the file path must be a string"),
    ("save save_format='json'", lambda c: c.model.save("m.h5", save_format="json"), V,
     r"save: save_format must be 'h5', 'keras' or None, got 'json'"),
    ("save_weights max_shard_size", lambda c: c.model.save_weights("w.weights.h5", max_shard_size=1.0),
     NotImplementedError, r"max_shard_size \(sharded weights files\) is not supported"),
    ("load_weights skip_mismatch='y'", lambda c: c.model.load_weights("w.h5", skip_mismatch="y"), V,
     invalid("skip_mismatch", "'y'")),
    ("load_weights by_name=2", lambda c: c.model.load_weights("w.h5", by_name=2), V, invalid("by_name", "2")),
    ("load_model filepath=3", lambda c: hpcnn.models.load_model(3), V, r"the file path must be a string"),
    ("load_model compile='y'", lambda c: hpcnn.models.load_model("m.h5", compile="y"), V, invalid("compile", "'y'")),
    ("load_model safe_mode=3", lambda c: hpcnn.models.load_model("m.h5", safe_mode=3), V, invalid("safe_mode", "3")),
    ("load_model custom_objects", lambda c: hpcnn.models.load_model("m.h5", custom_objects={"L": object}),
     NotImplementedError, r"custom_objects .* are not supported"),
    ("model_from_json json_string=3", lambda c: hpcnn.models.model_from_json(3), V, r"expected a JSON string"),
    ("to_json unknown keyword", lambda c: c.model.to_json(colour=1), T, r"unexpected keyword argument 'colour'"),
    ("LearningRateScheduler schedule=3", lambda c: callbacks.LearningRateScheduler(3), V,
     r"schedule must be a function \(epoch, lr\) -> lr"),
    ("LearningRateScheduler verbose=5", lambda c: callbacks.LearningRateScheduler(lambda e, lr: lr, verbose=5), V,
     invalid("verbose", "5")),
    ("LearningRateScheduler returns a string", lambda c: c.fit(callbacks=[callbacks.LearningRateScheduler(
        lambda e, lr: "0.1")]), V, r"The output of the `schedule` function should be a float\. Got: '0.1'"),
    ("LearningRateScheduler returns 0", lambda c: c.fit(callbacks=[callbacks.LearningRateScheduler(lambda e: 0.0)]),
     V, invalid("learning_rate", "0.0")),
    ("LearningRateScheduler with a schedule", lambda c: c.scheduled().fit(
        c.x, c.y, verbose=0, callbacks=[callbacks.LearningRateScheduler(lambda e, lr: lr)]), V,
     r"LearningRateScheduler sets the learning rate, but this optimizer's rate follows a CosineDecay schedule"),
    ("ReduceLROnPlateau factor=1", lambda c: callbacks.ReduceLROnPlateau(factor=1.0), V,
     r"ReduceLROnPlateau does not support a factor >= 1\.0\. Received factor=1\.0"),
    ("ReduceLROnPlateau factor=0", lambda c: callbacks.ReduceLROnPlateau(factor=0.0), V, invalid("factor", "0.0")),
    ("ReduceLROnPlateau patience=-1", lambda c: callbacks.ReduceLROnPlateau(patience=-1), V,
     invalid("patience", "-1")),
    ("ReduceLROnPlateau cooldown=1.5", lambda c: callbacks.ReduceLROnPlateau(cooldown=1.5), V,
     invalid("cooldown", "1.5")),
    ("ReduceLROnPlateau min_lr=-1", lambda c: callbacks.ReduceLROnPlateau(min_lr=-1.0), V, invalid("min_lr", "-1.0")),
    ("ReduceLROnPlateau min_delta='0'", lambda c: callbacks.ReduceLROnPlateau(min_delta="0"), V,
     invalid("min_delta", "'0'")),
    ("ReduceLROnPlateau mode", lambda c: callbacks.ReduceLROnPlateau(mode="lower"), V,
     r"Unknown value for `mode` argument of ReduceLROnPlateau.*Received: mode='lower'"),
    ("ReduceLROnPlateau monitor=None", lambda c: callbacks.ReduceLROnPlateau(monitor=None), V,
     r"monitor must be a metric name"),
    ("ReduceLROnPlateau unknown keyword", lambda c: callbacks.ReduceLROnPlateau(epsilon=1e-4), T,
     r"Unrecognized keyword arguments passed to ReduceLROnPlateau"),
    ("ReduceLROnPlateau with a schedule", lambda c: c.scheduled().fit(
        c.x, c.y, verbose=0, callbacks=[callbacks.ReduceLROnPlateau(monitor="loss")]), V,
     r"ReduceLROnPlateau sets the learning rate, but this optimizer's rate follows a CosineDecay schedule"),
    ("ReduceLROnPlateau.set_state bad", lambda c: callbacks.ReduceLROnPlateau().set_state({"wait": 1}), V,
     r"expected a dict with best, wait and cooldown_counter"),
    ("TerminateOnNaN raise_error='x'", lambda c: callbacks.TerminateOnNaN(raise_error="x"), V,
     invalid("raise_error", "'x'")),
    # ---------------------------------------------------------------- HDF5Dataset and the writer
    ("HDF5Dataset batch_size=0", lambda c: c.ds(batch_size=0), V, invalid("batch_size", "0")),
    ("HDF5Dataset batch_size=2.5", lambda c: c.ds(batch_size=2.5), V, invalid("batch_size", "2.5")),
    ("HDF5Dataset batch_size=2**31", lambda c: c.ds(batch_size=2**31), V, invalid("batch_size", "2147483648")),
    ("HDF5Dataset prefetch=0", lambda c: c.ds(prefetch=0), V, invalid("prefetch", "0")),
    ("HDF5Dataset shuffle='no'", lambda c: c.ds(shuffle="no"), V,
     r"Unknown value for `shuffle` argument of HDF5Dataset\. Allowed values are: \[True, False, 'rows', "
     r"'chunk_groups'\]\. Received: shuffle='no'"),
    ("HDF5Dataset shuffle=2", lambda c: c.ds(shuffle=2), V, invalid("shuffle", "2")),
    ("HDF5Dataset drop_remainder=2", lambda c: c.ds(drop_remainder=2), V, invalid("drop_remainder", "2")),
    ("HDF5Dataset cache", lambda c: c.ds(cache="disk"), V,
     r"Unknown value for `cache` argument of HDF5Dataset.*Received: cache='disk'"),
    ("HDF5Dataset memory_budget=0", lambda c: c.ds(memory_budget=0), V, invalid("memory_budget", "0")),
    ("HDF5Dataset seed=-1", lambda c: c.ds(seed=-1), V, invalid("seed", "-1")),
    ("HDF5Dataset seed=0.5", lambda c: c.ds(seed=0.5), V, invalid("seed", "0.5")),
    ("HDF5Dataset num_classes=0", lambda c: c.ds(num_classes=0), V, invalid("num_classes", "0")),
    ("HDF5Dataset one_hot=10.5", lambda c: c.ds(one_hot=10.5), V, r"one_hot must be None, True or a number"),
    ("HDF5Dataset one_hot=0", lambda c: c.ds(one_hot=0), V, r"one_hot must be None, True or a number"),
    ("HDF5Dataset x=3", lambda c: HDF5Dataset(c.h5, x=3, y="y"), V, r"x must be the name of a dataset"),
    ("HDF5Dataset y=''", lambda c: HDF5Dataset(c.h5, x="x", y=""), V, r"y must be the name of a dataset"),
    ("HDF5Dataset scale", lambda c: c.ds(scale="big"), V, r"scale must be a number"),
    ("epoch_batches epoch=-1", lambda c: next(c.ds().epoch_batches(-1)), V, invalid("epoch", "-1")),
    ("epoch_batches epoch=0.5", lambda c: next(c.ds().epoch_batches(0.5)), V, invalid("epoch", "0.5")),
    ("dataset[1.5]", lambda c: c.ds()[1.5], T, r"indices must be integers"),
    ("write_hdf5 level=10", lambda c: write_hdf5(c.h5 + "2", {"x": c.x}, level=10), V, invalid("level", "10")),
    ("write_hdf5 chunk_rows=0", lambda c: write_hdf5(c.h5 + "2", {"x": c.x}, chunk_rows=0), V,
     invalid("chunk_rows", "0")),
    ("write_hdf5 shuffle='x'", lambda c: write_hdf5(c.h5 + "2", {"x": c.x}, shuffle="x"), V, invalid("shuffle", "'x'")),
    # ---------------------------------------------------------------- utilities
    ("to_categorical num_classes=0.5", lambda c: to_categorical([0, 1], num_classes=0.5), V,
     invalid("num_classes", "0.5")),
    ("to_categorical strings", lambda c: to_categorical(["a"]), V, r"labels must be integer class indices, got dtype <U1"),
    ("set_random_seed(-1)", lambda c: set_random_seed(-1), V, invalid("seed", "-1")),
    ("set_random_seed('1')", lambda c: set_random_seed("1"), V, invalid("seed", "'1'")),
    ("set_num_threads(0)", lambda c: hpcnn.set_num_threads(0), V, invalid("n", "0")),
    ("set_num_threads(2.5)", lambda c: hpcnn.set_num_threads(2.5), V, invalid("n", "2.5")),
    # ---------------------------------------------------------------- hpcnn.distribute
    ("MirroredStrategy devices='cpu'", lambda c: hpcnn.distribute.MirroredStrategy("cpu"), V,
     r"devices must be a list such as"),
    ("MirroredStrategy devices=[]", lambda c: hpcnn.distribute.MirroredStrategy([]), V, r"devices is empty"),
    ("MirroredStrategy communication_options={}", lambda c: hpcnn.distribute.MirroredStrategy(
        ["cpu"], communication_options={}), V, r"communication_options must be a CommunicationOptions"),
    ("MultiWorkerMirroredStrategy cluster_resolver", lambda c: hpcnn.distribute.MultiWorkerMirroredStrategy(
        cluster_resolver="x"), V, r"cluster_resolver is not supported"),
    ("CommunicationOptions bytes_per_pack=-1", lambda c: hpcnn.distribute.CommunicationOptions(bytes_per_pack=-1), V,
     invalid("bytes_per_pack", "-1")),
    ("CommunicationOptions bytes_per_pack=1.5", lambda c: hpcnn.distribute.CommunicationOptions(bytes_per_pack=1.5),
     V, invalid("bytes_per_pack", "1.5")),
    ("CommunicationOptions timeout_seconds=0", lambda c: hpcnn.distribute.CommunicationOptions(timeout_seconds=0), V,
     invalid("timeout_seconds", "0")),
    ("CommunicationOptions implementation", lambda c: hpcnn.distribute.CommunicationOptions(implementation="ring"),
     V, r"implementation must be one of"),
    # ---------------------------------------------------------------- applications (the CIFAR ResNets)
    ("resnet_cifar depth=21", lambda c: applications.resnet_cifar(21), V, r"Expected 6n \+ 2.*Received: depth=21"),
    ("resnet_cifar depth=20.0", lambda c: applications.resnet_cifar(20.0), V, invalid("depth", "20.0")),
    ("resnet_cifar input_shape=(32, 32)", lambda c: applications.resnet_cifar(8, input_shape=(32, 32)), V,
     r"Expected \(height, width, channels\)"),
    ("resnet_cifar classes=0", lambda c: applications.resnet_cifar(8, classes=0), V, invalid("classes", "0")),
    ("resnet_cifar weight_decay=-1", lambda c: applications.resnet_cifar(8, weight_decay=-1), V,
     invalid("weight_decay", "-1")),
    ("resnet_cifar kernel_regularizer='l3'", lambda c: applications.resnet_cifar(8, kernel_regularizer="l3"), V,
     r"Could not interpret regularizer identifier: 'l3'"),
    ("resnet_cifar include_top='no'", lambda c: applications.resnet_cifar(8, include_top="no"), V,
     invalid("include_top", "'no'")),
    ("resnet_cifar pooling='sum'", lambda c: applications.resnet_cifar(8, pooling="sum"), V, r"`pooling`"),
    ("resnet_cifar classifier_activation", lambda c: applications.resnet_cifar(8, classifier_activation="tanhh"),
     V, r"unknown activation 'tanhh'"),
    ("resnet_cifar input_tensor=array", lambda c: applications.resnet_cifar(8, input_tensor=c.x), T,
     r"input_tensor must be an hpcnn tensor"),
    ("resnet_cifar shortcut='C'", lambda c: applications.resnet_cifar(8, shortcut="C"), V, r"`shortcut`"),
    ("resnet_cifar name='a/b'", lambda c: applications.resnet_cifar(8, name="a/b"), V, r"Argument `name`"),
    ("resnet_cifar seed=-1", lambda c: applications.resnet_cifar(8, seed=-1), V, invalid("seed", "-1")),
    ("resnet20_cifar unknown keyword", lambda c: applications.resnet20_cifar(depth=32), T, r"depth"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_argument_is_a_clear_error(case, tmp_path, threads):
    _, call, exc, pattern = case
    ctx = Ctx(tmp_path)
    steps_before = ctx.model.core.step
    with pytest.raises(exc, match=pattern) as info:
        call(ctx)
    assert type(info.value) is exc  # not a subclass such as a pybind11 cast error
    assert ctx.model.core.step == steps_before  # nothing trained before the check


def test_the_argument_table_covers_every_public_callable():
    """Each public function or constructor that takes arguments appears in the table."""
    covered = " ".join(c[0] for c in CASES)
    for name in ("fit", "evaluate", "predict", "predict_classes", "train_on_batch", "test_on_batch", "compile",
                 "Dense", "Conv2D", "MaxPooling2D", "Dropout", "Activation", "ReLU", "Flatten", "InputLayer",
                 "BatchNormalization", "AveragePooling2D", "GlobalAveragePooling2D", "GlobalMaxPooling2D",
                 "ZeroPadding2D", "Rescaling", "LeakyReLU", "ELU", "Softmax", "RandomFlip", "RandomTranslation",
                 "RandomCrop",
                 "Input", "Sequential", "build", "set_weights", "Model", "Add", "Concatenate", "__call__", "get_layer",
                 "Adam", "SGD", "EarlyStopping", "CSVLogger",
                 "LambdaCallback", "HDF5Dataset", "epoch_batches", "write_hdf5", "to_categorical", "set_random_seed",
                 "set_num_threads", "ModelCheckpoint", "BackupAndRestore", "save", "save_weights", "load_weights",
                 "RMSprop", "AdamW", "exclude_from_weight_decay", "ExponentialDecay",
                 "PiecewiseConstantDecay", "PolynomialDecay", "InverseTimeDecay", "CosineDecay",
                 "CosineDecayRestarts", "L1", "L2", "L1L2", "kernel_regularizer", "bias_regularizer",
                 "LearningRateScheduler", "ReduceLROnPlateau", "TerminateOnNaN", "sample_weight", "class_weight",
                 "validation_steps", "BinaryCrossentropy", "CategoricalCrossentropy", "SparseCategoricalCrossentropy",
                 "MeanSquaredError", "TopKCategoricalAccuracy", "BinaryAccuracy", "CategoricalAccuracy",
                 "PyDataset", "MirroredStrategy", "MultiWorkerMirroredStrategy", "CommunicationOptions", "load_model",
                 "model_from_json", "to_json", "save_format", "skip_mismatch", "by_name", "resnet_cifar",
                 "resnet20_cifar"):
        assert name in covered, name


def test_good_arguments_still_work(tmp_path):
    """The checks accept what Keras accepts: NumPy integers, None defaults, Keras' spellings."""
    c = Ctx(tmp_path)
    h = c.model.fit(c.x, c.y, batch_size=np.int64(8), epochs=np.int32(2), steps_per_epoch=2, verbose=False,
                    validation_split=0.25, shuffle=np.bool_(True))
    assert len(h.history["loss"]) == 2 and c.model.core.step == 4
    assert c.model.fit(c.x, c.y, epochs=0, verbose=0).history == {}  # Keras: epochs=0 trains nothing
    assert len(c.model.predict(c.x, batch_size=5, steps=2)) == 10  # the first `steps` batches
    loss_two, _ = c.model.evaluate(c.x[:16], c.y[:16], batch_size=8, verbose=0)
    assert c.model.evaluate(c.x, c.y, batch_size=8, steps=2, verbose=0)[0] == pytest.approx(loss_two)
    c.model.compile(optimizers.SGD(0.1, momentum=0, nesterov=0), "sparse_categorical_crossentropy",
                    run_eagerly=False, jit_compile="auto", steps_per_execution=1, loss_weights=None)
    Conv2D(np.int64(4), [3, np.int32(3)], strides=1, dilation_rate=(1, 1), groups=1, kernel_regularizer=None)
    Dense(4, dtype="float32", trainable=False, name="d")
    Dense(4, use_bias=False, activation="gelu")
    Conv2D(4, 3, strides=2, use_bias=np.bool_(False), activation="swish")
    BatchNormalization(axis=np.int64(-1), momentum=0.9, epsilon=1e-5, center=False, scale=np.bool_(False),
                       gamma_initializer="ones", beta_regularizer=None, synchronized=False, fused=True, renorm=False)
    AveragePooling2D(np.int64(3), strides=(1, 2), padding="same", data_format="channels_last")
    GlobalMaxPooling2D(keepdims=np.bool_(True))
    ZeroPadding2D(((np.int64(1), 0), (2, 3)))
    Rescaling(np.float32(1 / 255), offset=np.array([0.0, -1.0]))
    LeakyReLU(alpha=np.float64(0.1))
    ReLU(max_value=6, negative_slope=0.0)
    Softmax(axis=-1)
    ELU(np.float32(0.5))
    Dropout(0)
    RandomFlip("horizontal", seed=None, data_format="channels_last")
    RandomTranslation(np.float32(0.1), [np.int64(-1), 0.5], fill_value=np.int64(2))
    RandomCrop(np.int64(4), np.int32(4))
    InputLayer(batch_shape=(None, 4, 4, 1), batch_size=None, dtype="uint8")
    ds = c.ds(batch_size=np.int64(8), seed=np.uint64(2**64 - 1), one_hot=None)
    assert len(ds) == 4 and ds.batch_size == 8
    assert hpcnn.Sequential([Dense(2)], seed=2**64 - 1).seed == 2**64 - 1
    # issue 14: weights, losses and metrics as Keras spells them
    c.model.compile("adam", "sparse_categorical_crossentropy", ["accuracy"])
    c.model.fit(c.x, c.y, sample_weight=np.arange(32) % 3, epochs=1, verbose=0)
    c.model.fit(c.x, c.y, class_weight={np.int64(0): 2, 1: np.float32(0.5)}, epochs=1, verbose=0)
    c.model.evaluate(c.x, c.y, sample_weight=np.ones((32, 1), np.float64), verbose=0)
    c.model.train_on_batch(c.x, c.y, sample_weight=None, class_weight=None)
    hpcnn.losses.BinaryCrossentropy(from_logits=np.bool_(True), label_smoothing=np.float32(0.1))
    hpcnn.losses.CategoricalCrossentropy(label_smoothing=1, name="cce")
    hpcnn.metrics.TopKCategoricalAccuracy(k=np.int64(2), name="top2")
    hpcnn.metrics.BinaryAccuracy(threshold=np.float64(0.3))
    hpcnn.utils.PyDataset(workers=np.int64(4), use_multiprocessing=False, max_queue_size=2)


# ------------------------------------------------------------------ item 7: labels that wrap around
@pytest.mark.parametrize("dtype", [np.int64, np.uint64, np.uint32, np.float64])
def test_labels_beyond_int32_are_refused_not_wrapped(dtype):
    """2**32+3 used to be cast to int32 first and train silently as class 3."""
    x, y = data(8)
    labels = y.astype(dtype)
    big = 2**32 + 3 if dtype != np.uint32 else 2**31 + 1  # uint32 cannot hold 2**32+3; 2**31+1 wraps negative
    labels[5] = big
    m = small_model()
    m.compile("adam", "sparse_categorical_crossentropy")
    with pytest.raises(ValueError, match=rf"^label {big}(\.0)? \(row 5\) is outside \[0, 3\)"):
        m.fit(x, labels, batch_size=4, verbose=0)
    with pytest.raises(ValueError, match=rf"label {big}(\.0)? \(row 5\)"):
        m.train_on_batch(x, labels)
    with pytest.raises(ValueError, match=rf"label {big}(\.0)? \(row 5\)"):
        m.evaluate(x, labels, verbose=0)
    assert m.core.step == 0


def test_first_bad_label_is_named_and_negatives_and_too_large_still_raise():
    x, _ = data(6)
    m = small_model()
    m.compile("adam", "sparse_categorical_crossentropy")
    with pytest.raises(ValueError, match=r"^label -1 \(row 1\)"):
        m.fit(x, np.array([0, -1, 2**40, 1, 2, 3]), verbose=0)
    with pytest.raises(ValueError, match=r"^label 3 \(row 3\)"):
        m.fit(x, np.array([0, 1, 2, 3, 2**40, 0]), verbose=0)
    with pytest.raises(ValueError, match=r"label 18446744073709551615 \(row 0\)"):  # not -1
        m.fit(x, np.full(6, 2**64 - 1, np.uint64), verbose=0)
    with pytest.raises(ValueError, match=r"needs whole-number class indices; label 1.5 \(row 2\)"):
        m.fit(x, np.array([0, 1, 1.5, 0, 0, 0]), verbose=0)
    with pytest.raises(ValueError, match=r"label 1e\+20 \(row 0\)"):
        m.fit(x, np.full(6, 1e20), verbose=0)


def test_core_binding_checks_wide_labels_before_its_cast():
    """hpcnn._core.Model.train_step given int64/uint64 labels directly (no Python preparation),
    as this step's batch and as the next batch (its error raised at its turn)."""
    x, _ = data(4)
    good = np.array([0, 1, 2, 0], np.int64)
    m = small_model()
    m.compile("adam", "sparse_categorical_crossentropy")
    core = m.core
    steps = 0
    for labels, shown in ((np.array([0, 1, 2**32 + 3, 0], np.int64), 2**32 + 3),
                          (np.array([0, 1, 2, 2**64 - 1], np.uint64), 2**64 - 1),
                          (np.array([0, -(2**32) + 1, 0, 0], np.int64), -(2**32) + 1)):
        with pytest.raises(ValueError, match=rf"label {shown} \(row \d\) is outside \[0, 3\)"):
            core.train_step((x, labels))
        assert core.step == steps
        core.train_step((x, good), (x, labels))  # trains on `good`, stages the bad batch's error
        steps += 1
        with pytest.raises(ValueError, match=rf"label {shown} \(row \d\)"):
            core.train_step(None)
        assert core.step == steps
    core.train_step((x, good))  # in range: fine
    assert core.step == steps + 1


def test_to_categorical_checks_labels_on_their_own_type():
    assert to_categorical(np.array([2, 0], np.uint64), 3).tolist() == [[0, 0, 1], [1, 0, 0]]
    with pytest.raises(ValueError, match=r"label 4294967299 \(row 1\) is outside \[0, 10\)"):
        to_categorical(np.array([1, 2**32 + 3]), 10)
    with pytest.raises(ValueError, match=r"negative label -2 \(row 0\)"):
        to_categorical(np.array([-2, 2**32 + 3]))


def test_hdf5_labels_beyond_int32_are_refused(tmp_path):
    """The loader reads labels as int64 and checks them before its int32 cast."""
    p = str(tmp_path / "wide.h5")
    x, y = data(8)
    y = y.astype(np.int64)
    y[6] = 2**32 + 3
    write_hdf5(p, {"x": x, "y": y})
    with pytest.raises(ValueError, match=r"label 4294967299 at row 6 .*outside \[0, 3\)"):
        HDF5Dataset(p, x="x", y="y", num_classes=3)
    with pytest.raises(ValueError, match=r"label 4294967299: too large"):
        HDF5Dataset(p, x="x", y="y")


# ------------------------------------------------------------------ item 8: shapes whose sizes overflow
@pytest.mark.parametrize("layers, pattern", [
    # (2**40)**3 elements: the Flatten size wrapped around to 0 and the model built with 2 parameters
    ([InputLayer(input_shape=[2**40, 2**40, 2**40]), Flatten(), Dense(2)], r"more than 2\^63-1 elements"),
    ([InputLayer(input_shape=[2**21, 2**21, 2**21]), Flatten(), Dense(2)], r"more than 2\^63-1 elements"),
    # the height was cast to int (8) and the model built for a 8x8 input
    ([InputLayer(input_shape=[2**32 + 8, 8, 1]), Conv2D(1, 3)], r"Conv2D: input shape .* larger than 2147483647"),
    ([InputLayer(input_shape=[8, 2**32 + 8, 1]), MaxPooling2D(2)], r"MaxPooling2D: input shape .* larger than"),
    ([InputLayer(input_shape=[2**16, 2**16, 1]), Flatten(), Dense(1)], r"Dense: input shape \(4294967296,\)"),
    ([InputLayer(input_shape=[8, 8, 1]), Conv2D(1, (65536, 65536), padding="same")], r"weights per filter"),
    ([InputLayer(input_shape=[2**31 - 1]), Dense(2**31 - 1), Dense(2**31 - 1), Dense(2**31 - 1)],
     r"parameter count: .* does not fit in 64 bits"),
    ([InputLayer(input_shape=[2**31 - 1]), Dense(2**31 - 1)], r"size in bytes .* does not fit in 64 bits"),
])
def test_shapes_that_overflow_are_refused_at_build(layers, pattern):
    m = hpcnn.Sequential(layers)
    with pytest.raises(ValueError, match=pattern):
        m.build()
    assert not m.built


def test_large_but_representable_shapes_still_build():
    m = hpcnn.Sequential([InputLayer(input_shape=[2**31 - 1, 1, 1]),
                          MaxPooling2D(2**31 - 1, strides=2**31 - 1, padding="same")])
    assert m.output_shape == (None, 1, 1, 1)
    wide = hpcnn.Sequential([InputLayer(input_shape=[3, 5, 7]), Flatten(), Dense(4)])
    assert wide.count_params() == 3 * 5 * 7 * 4 + 4
