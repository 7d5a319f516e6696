"""Keras' config and files of a model (mixed into ``Model``): ``get_config`` / ``from_config``
(Keras' functional config, a nested model as one layer of class ``Sequential`` / ``Functional``),
``to_json``, ``save``, ``save_weights`` and ``load_weights``, whose layouts live in hpcnn.formats."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from ..formats import keras_config, model_files
from ..layers import KerasTensor
from . import nesting
from .functional_config import functional_from_config


class ModelSerialization:
    """Config and files of ``Model`` (what it reads of the model is public there)."""

    def get_config(self) -> Dict[str, Any]:
        """Keras' functional config: the layers (class, name, own config, inbound nodes: the
        tensors each is called on, as ``{"args": [...], "kwargs": {}}`` with Keras'
        ``__keras_tensor__`` records) and the input and output layers."""
        def tensor(t: KerasTensor) -> Dict[str, Any]:
            return {"class_name": "__keras_tensor__",
                    "config": {"shape": list(t.shape), "dtype": t.dtype, "keras_history": [t.layer.name, 0, 0]}}

        cfg_layers = []
        calls = {id(item.model): item for item, _ in self.top_level_nodes() if isinstance(item, nesting.NestedCall)}
        for layer in self.layers:
            inbound: List[Dict[str, Any]] = []
            call = calls.get(id(layer))
            if call is not None:  # a nested model: its own config, called as Keras records it
                kwargs = {} if call.training is None else {"training": call.training}
                inbound = [{"args": [tensor(t) for t in call.inbound_tensors or []], "kwargs": kwargs}]
            elif not layer.is_input:
                ts = [tensor(t) for t in layer.inbound_tensors or []]
                inbound = [{"args": [ts if layer.merges_inputs else ts[0]], "kwargs": {}}]
            cfg_layers.append({"class_name": nesting.keras_class_name(layer), "name": layer.name,
                               "config": layer.get_config(), "inbound_nodes": inbound})
        return {"name": self.name, "trainable": self.trainable, "layers": cfg_layers,
                "input_layers": [[self.layers[0].name, 0, 0]],
                "output_layers": [[self.output.layer.name, 0, 0]]}

    @classmethod
    def from_config(cls, config: Dict[str, Any]) -> Any:
        """The model get_config() described (also Keras 2's inbound-node lists); ValueError for
        anything else, naming what is wrong."""
        return functional_from_config(cls, config)

    def save(self, filepath: str, overwrite: bool = True, include_optimizer: bool = True,
             save_format: Optional[str] = None) -> None:
        """Save the model (architecture, weights, compile settings, step counter and, with
        ``include_optimizer`` (Keras' default), the optimizer's state: moments, step count,
        learning rate) in Keras' format for the file's name: ``.keras`` a Keras 3 archive, anything
        else (``.h5``) a legacy Keras HDF5 model file; both open in Keras
        (``keras.models.load_model``) and in hpcnn, whose ``load_model`` then gives a model whose
        ``fit`` continues exactly as this one's would. Written atomically (a temporary file flushed
        and renamed into place: never a half-written model)."""
        model_files.save_model(self, filepath, overwrite, include_optimizer, save_format)

    def save_weights(self, filepath: str, overwrite: bool = True, max_shard_size: Optional[float] = None) -> None:
        """Save the weights: ``*.weights.h5`` in Keras 3's layout, any other name (``.h5``) in the
        legacy Keras HDF5 layout; Keras' ``load_weights`` and hpcnn's read both. Written atomically."""
        model_files.save_weights(self, filepath, overwrite, max_shard_size)

    def load_weights(self, filepath: str, skip_mismatch: bool = False, by_name: bool = False) -> None:
        """Load weights saved by Keras or hpcnn (``.weights.h5``, legacy ``.h5``, ``.keras``, hpcnn
        model files). Each array is checked first: a file that does not fit raises ValueError and
        the model keeps its weights (``skip_mismatch=True``: layers that do not fit keep theirs,
        with a warning). ``by_name=True`` (legacy ``.h5``): match layers by name."""
        self.claim_weights()
        model_files.load_weights(self, filepath, skip_mismatch, by_name)

    def to_json(self, **kwargs: Any) -> str:
        """The model's config as Keras 3's JSON (``keras.models.model_from_json`` and
        ``hpcnn.models.model_from_json`` read it); ``json.dumps`` arguments pass through."""
        return keras_config.to_json(self, **kwargs)
