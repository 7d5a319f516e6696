"""Callbacks with Keras names and hooks, one per module: History, EarlyStopping, CSVLogger,
LambdaCallback, LearningRateScheduler, ReduceLROnPlateau, TerminateOnNaN, ModelCheckpoint,
BackupAndRestore and TensorBoard (which needs the `tensorboard` package only when one is made).

Callbacks whose behaviour depends on what they saw earlier in training (EarlyStopping's counters,
ReduceLROnPlateau's, ModelCheckpoint's best value, History's epochs) implement the state protocol,
``get_state()`` / ``set_state(state)``: BackupAndRestore saves their states with its backups and
gives them back when a later ``fit`` resumes (after every callback's ``on_train_begin``), so a
resumed run decides exactly as an uninterrupted one. fit reaches the checkpointing callbacks only
through the base class's hooks (base.py), never by their names, and makes one call per hook: a
``CallbackList`` (callback_list.py) passes each on to every callback.
"""
from .backup_and_restore import BackupAndRestore
from .base import Callback, FitRun
from .callback_list import CallbackList
from .csv_logger import CSVLogger
from .early_stopping import EarlyStopping
from .history import History
from .lambda_callback import LambdaCallback
from .learning_rate_scheduler import LearningRateScheduler
from .model_checkpoint import ModelCheckpoint
from .reduce_lr_on_plateau import ReduceLROnPlateau
from .tensorboard import TensorBoard
from .terminate_on_nan import TerminateOnNaN

__all__ = ["Callback", "History", "EarlyStopping", "CSVLogger", "LambdaCallback", "LearningRateScheduler",
           "ReduceLROnPlateau", "TerminateOnNaN", "ModelCheckpoint", "BackupAndRestore", "TensorBoard",
           "FitRun", "CallbackList"]
