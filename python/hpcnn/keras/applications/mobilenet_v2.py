"""``keras.applications.mobilenet_v2``: hpcnn.applications.mobilenet_v2 under Keras' name."""
from __future__ import annotations

from .._compat import install

install(__name__, "applications.mobilenet_v2", sources=["hpcnn.applications.mobilenet_v2"],
        default_advice="not in hpcnn yet: hpcnn.keras.applications has VGG16 and ResNet50 (their "
                       "preprocess_input and decode_predictions in keras.applications.vgg16 and .resnet50)")
