"""``keras.callbacks`` on hpcnn: Callback, History, EarlyStopping, CSVLogger, LambdaCallback,
LearningRateScheduler, ReduceLROnPlateau, TerminateOnNaN, ModelCheckpoint, BackupAndRestore,
TensorBoard."""
from __future__ import annotations

from ._compat import install

_ADVICE = {"OrbaxCheckpoint": "use ModelCheckpoint (model files) or BackupAndRestore (resumable backups)",
          "ProgbarLogger": "fit(verbose=1) draws the progress bar", "RemoteMonitor": "use CSVLogger or LambdaCallback",
          "SwapEMAWeights": "hpcnn's optimizers keep no moving average of the weights (use_ema=False): "
                            "ModelCheckpoint(save_best_only=True) keeps the best weights instead",
          "CallbackList": "pass a list of callbacks to fit(callbacks=[...])"}
install(__name__, "callbacks", sources=["hpcnn.callbacks"], advice=_ADVICE)
