"""Every refusal in hpcnn.keras names what is unsupported and the nearest thing that works: this
walks every Keras 3.15 name of every hpcnn.keras module that hpcnn refuses, and checks that its
message names the Keras name, gives advice that points at something hpcnn has (a name hpcnn.keras
answers, an hpcnn path that resolves, a call of the model, or NumPy/Pillow for work outside the
model), and calls nothing missing that hpcnn now has (out-of-date texts)."""
import importlib
import re

import pytest

import hpcnn
from hpcnn import keras
from hpcnn.keras import _compat
from hpcnn.keras._keras_names import NAMES

MODULES = {"": "hpcnn.keras", "layers.merge": "hpcnn.keras.layers.merge"}
MODULES.update({name: f"hpcnn.keras.{name}" for name in NAMES if name})
# Phrases of texts written before hpcnn had the functional API, augmentation layers, several
# devices, callable PyDataset... : a refusal must not say them any more.
STALE = ["not in this hpcnn yet", "not in this hpcnn version", "need the functional API", "no symbolic tensors",
         "augmentation layers are not implemented", "multi-GPU training is not", "not yet: subclass"]


def refusals():
    """(keras module, name, message) for every name hpcnn refuses (at access, or when used)."""
    out = []
    for keras_module, module_name in MODULES.items():
        module = importlib.import_module(module_name)
        names = set(NAMES.get(keras_module, ()))
        if keras_module == "layers.merge":
            names = {"Add", "Concatenate", "Multiply", "Average", "Maximum", "Minimum", "Subtract", "Dot", "add",
                     "concatenate", "multiply", "average", "maximum", "minimum", "subtract", "dot"}
        for name in sorted(names):
            try:
                value = getattr(module, name)
            except NotImplementedError as e:
                out.append((keras_module, name, str(e)))
                continue
            text = getattr(value, "_hpcnn_not_implemented", None)
            if text:
                out.append((keras_module, name, text))
    return out


REFUSALS = refusals()


def available_names():
    """Every Keras name hpcnn.keras answers with an object, in any module, and hpcnn's own top-level names."""
    names = set(dir(hpcnn))
    for keras_module, module_name in MODULES.items():
        module = importlib.import_module(module_name)
        names |= set(_compat.available(module, keras_module)) | set(dir(module))
    names |= set(hpcnn.layers.__all__) | set(hpcnn.callbacks.__all__) | set(hpcnn.optimizers.__all__)
    return names


AVAILABLE = available_names()


def resolves(path):
    """An 'hpcnn.a.b' path names a module or attribute that exists."""
    parts = path.rstrip(".").split(".")
    obj = None
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr, None)
        return obj is not None
    return False


def names_an_alternative(advice):
    if any(w in advice for w in ("NumPy", "numpy", "Pillow", "model.", "fit(", "fit,", "fit with", "to fit",
                                 "activation='", "verbose=")):
        return True
    if any(resolves(p) for p in re.findall(r"\bhpcnn(?:\.\w+)+", advice)):
        return True
    # A class (CamelCase), a function with an underscore, or anything called: e.g. Conv2D, to_categorical, l2(
    for token, call in re.findall(r"([A-Za-z_][A-Za-z0-9_]*)(\(?)", advice):
        if token in AVAILABLE and (token[0].isupper() or "_" in token or call):
            return True
    return False


def test_there_are_refusals_to_walk():
    assert len(REFUSALS) > 300  # Keras has far more names than hpcnn: the walk must see them
    assert {("layers", "Lambda"), ("layers", "maximum"), ("layers", "Maximum"), ("", "ops")} <= {
        (m, n) for m, n, _ in REFUSALS}


@pytest.mark.parametrize("keras_module, name, text", REFUSALS,
                         ids=[f"{m or 'keras'}.{n}" for m, n, _ in REFUSALS])
def test_every_refusal_names_the_missing_thing_and_an_alternative(keras_module, name, text):
    where = f"keras.{keras_module}.{name}" if keras_module else f"keras.{name}"
    assert text.startswith(f"{where} is not available in hpcnn: "), text
    advice = text[len(f"{where} is not available in hpcnn: "):]
    advice = advice[:advice.rfind(" (docs/keras.md")]
    assert advice.strip(), f"{where}: no advice"
    assert names_an_alternative(advice), f"{where}: the advice names nothing that works: {advice!r}"
    for phrase in STALE:
        assert phrase not in text, f"{where}: out-of-date text {phrase!r}"
    for layer in hpcnn.layers.__all__:
        # "no Conv2D", "Add is not ...", "Concatenate ... not implemented": a layer hpcnn has, called missing
        assert not re.search(rf"\b(no|without|lacks?) {layer}\b", advice), (where, layer, advice)
        assert not re.search(rf"\b{layer}\b (is|are) not\b", advice), (where, layer, advice)


def test_the_issue_s_examples():
    with pytest.raises(NotImplementedError, match=r"keras\.layers\.Lambda is not available in hpcnn: .*built-in "
                                                  r"layer or activation.*NumPy"):
        keras.layers.Lambda
    with pytest.raises(NotImplementedError, match=r"keras\.layers\.Maximum is not available in hpcnn: .*Add.*"
                                                  r"Concatenate"):
        keras.layers.Maximum()
    for name in ("Add", "Multiply", "Concatenate", "add", "multiply", "concatenate"):
        assert not hasattr(getattr(keras.layers, name), "_hpcnn_not_implemented")
        assert name in _compat.available(keras.layers, "layers") or name.islower()
