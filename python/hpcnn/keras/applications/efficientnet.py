"""``keras.applications.efficientnet``: hpcnn.applications.efficientnet under Keras' name."""
from __future__ import annotations

from .._compat import install

install(__name__, "applications.efficientnet", sources=["hpcnn.applications.efficientnet"],
        default_advice="not in hpcnn yet: hpcnn.keras.applications has VGG16, ResNet50 and MobileNetV2 "
                       "(their preprocess_input and decode_predictions in keras.applications.vgg16, .resnet50, .mobilenet_v2)")
