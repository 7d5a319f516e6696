# Generated from the installed hpcnn._core by tools/gen_core_stubs.py: do not edit by hand.
# After changing csrc/bindings/ and reinstalling, regenerate with: python tools/gen_core_stubs.py
"""hpcnn's C++/CUDA core (use the `hpcnn` package, not this module directly)"""
import collections.abc
import hpcnn._core.distribute
import numpy
import numpy.typing
import typing
from . import data as data
from . import distribute as distribute
from . import ops as ops

class CudaDeviceInfo:

    @property
    def compute_capability(self) -> tuple[int, int]:
        ...

    @property
    def free_memory(self) -> int:
        ...

    @property
    def index(self) -> int:
        ...

    @property
    def memory_bandwidth_gbs(self) -> float:
        ...

    @property
    def memory_bus_width_bits(self) -> int:
        ...

    @property
    def multiprocessors(self) -> int:
        ...

    @property
    def name(self) -> str:
        ...

    @property
    def pci_bus_id(self) -> str:
        ...

    @property
    def total_memory(self) -> int:
        ...

class DeviceMemoryBlock:
    """Device memory held from Python (cuda_hold_memory); freed by release() or when collected."""

    @property
    def nbytes(self) -> int:
        ...

    def release(self) -> None:
        ...

class Model:

    def __init__(self, input_shape: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], layers: list, seed: typing.SupportsInt | typing.SupportsIndex, inputs: collections.abc.Sequence[collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex]] | None=None) -> None:
        """A model of `layers`: one config per Keras layer (its position; class_name the Keras class), lowered to core layers by the core (nn/lowering.h: fused ReLUs, the softmax split, BatchNormalization+ReLU). inputs: per layer, the indices of the layers it reads (-1: the model's input; each earlier in the list; the last layer is the output); None: a chain (Sequential)."""

    def call_training(self, batch: object) -> numpy.ndarray:
        """Keras' model(x, training=True): the outputs of a forward pass in training mode (dropout drawn, BatchNormalization on the batch's statistics, updating its moving statistics), with no loss, backward pass or optimizer step; the model need not be compiled. Dropout draws its own stream (a call counter): two calls draw different masks, fit's steps are unchanged. batch: (x,) as for predict_step. Drops a batch staged ahead."""

    @property
    def calls(self) -> int:
        ...

    def compile(self, optimizer: dict, loss: str, from_logits: bool=False, label_smoothing: typing.SupportsFloat | typing.SupportsIndex=0.0) -> None:
        ...

    @property
    def core_layers(self) -> list[list[str]]:
        ...

    @property
    def device(self) -> str:
        ...

    def distribute(self, group: hpcnn._core.distribute.Group, bucket_bytes: typing.SupportsInt | typing.SupportsIndex) -> None:
        """Trains this (compiled) model data-parallel with `group`: makes this process's other replicas (same layers, seed and optimizer, on the group's devices), broadcasts replica 0 of rank 0's weights, and sums gradients in buckets of bucket_bytes (0: one bucket)."""

    @property
    def distributed(self) -> bool:
        ...

    def drop_staged(self) -> None:
        """Drops a staged batch (and releases its arrays): a loop left early."""

    def get_layer_weights(self, position: typing.SupportsInt | typing.SupportsIndex) -> list:
        """One layer's weights (its position: the index of its config), host copies in Keras' order and layouts, wherever the model lives: get_weights() for one layer."""

    def get_weights(self) -> list:
        ...

    def gradient_buffer(self, keras_layout: bool=False, padded: bool=False) -> numpy.ndarray:
        """The gradients of the last training step, aligned with parameter_buffer(keras_layout, padded) element for element (packed in the device's layout unless keras_layout=True; padded=True: as held, live on the CPU)."""

    @property
    def has_staged(self) -> bool:
        ...

    def inference_chunk_rows(self, batch_size: typing.SupportsInt | typing.SupportsIndex) -> int:
        """How many rows of a batch of batch_size an inference step (evaluate, predict) runs through all the layers at a time: on the CPU, chunks whose activations stay in the caches (batch_size on a GPU)."""

    def inference_chunks_side_by_side(self, batch_size: typing.SupportsInt | typing.SupportsIndex) -> bool:
        """Whether an inference step of batch_size rows on the CPU runs its chunks side by side, one per thread (each op on its thread alone), after the first chunk; else one after another, each op over the threads."""

    def inference_chunks_split(self, batch_size: typing.SupportsInt | typing.SupportsIndex) -> int:
        """How many of the graph's leading nodes an inference step of batch_size rows on the CPU runs in chunks (the rest on the whole batch; every node where it equals the number of nodes)."""

    @property
    def iterations(self) -> int:
        ...

    @property
    def layer_output_shapes(self) -> list[list[int]]:
        ...

    @property
    def layer_param_counts(self) -> list[int]:
        ...

    @property
    def layer_weights(self) -> list:
        ...

    @property
    def learning_rate(self) -> float:
        ...

    @learning_rate.setter
    def learning_rate(self, arg1: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...

    def memory_report(self, batch_size: typing.SupportsInt | typing.SupportsIndex) -> dict:
        """Bytes of a step's activations and gradients for batches of batch_size rows: the planned arena of each step kind (train, test, predict), for comparison the training step's buffers each kept for the whole step (train_keep_all: no reuse, memory_reuse=False) and the layout of one buffer per activation, the arena allocated now, the bytes of the statistics a training or test step copies back (statistics), and what the predict plan merges: BatchNormalizations folded into convolutions (predict_folded), residual blocks whose Add and ReLU the last convolution computes (predict_residual_blocks); and the training plan's residual blocks whose Add and ReLU the last BatchNormalization computes (train_residual_blocks)."""

    @property
    def memory_reuse(self) -> bool:
        ...

    @memory_reuse.setter
    def memory_reuse(self, arg1: bool) -> None:
        ...

    @property
    def node_inputs(self) -> list[list[int]]:
        ...

    @property
    def num_params(self) -> int:
        ...

    @property
    def num_trainable_params(self) -> int:
        ...

    def optimizer_state(self, keras_layout: bool=False) -> dict:
        """Host copies of the optimizer's state buffers by name, in state_names order (Keras 3's names: Adam, AdamW: momentum, velocity; SGD with momentum: momentum; RMSprop: velocity, momentum (momentum > 0), average_gradient (centered)), each flat and packed like parameter_buffer() (one value per parameter): in the layout of the model's device, or keras_layout=True in Keras' layout (what files hold). {} before the first step."""

    @property
    def optimizer_state_names(self) -> list[str]:
        ...

    @property
    def output_shapes(self) -> list[list[int]]:
        ...

    @property
    def param_buffer_size(self) -> int:
        ...

    @property
    def param_offsets(self) -> list[int]:
        ...

    def parameter_buffer(self, keras_layout: bool=False, padded: bool=False) -> numpy.ndarray:
        """A copy of the parameters, packed (one value per parameter: the trainable arrays, then the others, flattened) in the layout of the model's device: conv kernels are (kh, kw, in, out) on the CPU but (out, kh, kw, in) on a GPU. keras_layout=True: every kernel in Keras' layout (comparable across devices). padded=True: the buffer as held, every array at param_offsets with zero padding between them (a live view on the CPU, a copy from a GPU)."""

    def predict_step(self, batch: object, next: object=None) -> numpy.ndarray:
        """Outputs for batch (x[, y[, rows[, decode]]]) (y is ignored); stages next. batch as for train_step."""

    def relayout_buffer(self, buffer: typing.Annotated[numpy.typing.ArrayLike, numpy.float32], from_device: str, to_device: str) -> numpy.ndarray:
        """A host copy of `buffer` (flat and packed, aligned with parameter_buffer(): parameters, gradients, optimizer moments) converted from the layout the parameters have on from_device to the one on to_device: the conversion to() applies. A host computation: needs no GPU (for tests and tools)."""

    @property
    def replica_devices(self) -> list[str]:
        ...

    def replica_weights(self, replica: typing.SupportsInt | typing.SupportsIndex) -> list:
        """get_weights() of this process's replica `replica` (for tests)."""

    @property
    def seed(self) -> int:
        ...

    def set_class_weights(self, weights: collections.abc.Sequence[typing.SupportsFloat | typing.SupportsIndex]) -> None:
        """Per-class loss weights indexed by the target's class ([]: none)."""

    def set_inference_chunk_rows(self, rows: typing.SupportsInt | typing.SupportsIndex) -> None:
        """rows > 0: inference steps on the CPU run chunks of that many rows (tests, benchmarks); 0: chosen from the caches (the default)."""

    def set_layer_weights(self, position: typing.SupportsInt | typing.SupportsIndex, weights: list) -> None:
        """Replaces one layer's weights (Keras' order and layouts) on every replica of this process, on the model's device. ValueError naming the layer and the expected shapes, and nothing changed, on a count or shape mismatch."""

    def set_learning_rate_schedule(self, schedule: dict) -> None:
        """Lets a schedule (class_name and Keras' arguments) drive the learning rate from the next step on, evaluated at `iterations`."""

    def set_metrics(self, metrics: collections.abc.Sequence[tuple[str, typing.SupportsInt | typing.SupportsIndex, typing.SupportsFloat | typing.SupportsIndex]]) -> None:
        """The metrics each train/test step computes on the outputs: (core name, k, threshold) each; their sums over the step's rows (of every replica under a strategy) are the step's fourth result."""

    def set_optimizer_state(self, buffers: dict, iterations: typing.SupportsInt | typing.SupportsIndex) -> None:
        """Restores the optimizer: buffers {name: flat float32 array in Keras' layout} (all of state_names, or {} for a fresh state) and the step count. ValueError, nothing changed, when they do not fit."""

    def set_rng_state(self, seed: typing.SupportsInt | typing.SupportsIndex, step: typing.SupportsInt | typing.SupportsIndex) -> None:
        """Restores the random state (seed and step counter) of a saved or backed-up model: its next training steps then draw the dropout masks of an uninterrupted run."""

    def set_trainable(self, per_layer: collections.abc.Sequence[bool]) -> None:
        """Which layers (one flag per Keras layer) the optimizer updates (Python calls it at compile)."""

    def set_weights(self, arg0: list) -> None:
        ...

    @property
    def staging_slots(self) -> tuple[int, int]:
        ...

    @property
    def step(self) -> int:
        ...

    @property
    def step_collectives(self) -> tuple:
        ...

    def sync_replicas(self) -> None:
        """Replica 0 of rank 0's weights to every replica (collective: every rank calls it)."""

    def test_step(self, batch: object, next: object=None) -> tuple:
        """Loss, accuracy and metric sums without training: (loss_sum, correct, n, metric_sums); batch and next as for train_step."""

    def to(self, arg0: str) -> None:
        ...

    def train_step(self, batch: object, next: object=None) -> tuple:
        """One training step; returns (loss_sum, correct, n, metric_sums): metric_sums is each set_metrics metric's sum over the step's rows (of every replica under a strategy), in set_metrics' order. batch: (x, y[, rows[, decode[, sample_weight[, first_row, global_rows]]]]) (first_row, global_rows: these rows' place in a global batch, for a rank's share). next: the following batch, staged now (on a GPU its upload overlaps this step's backward pass); an error staging it is raised by the call that takes it. The core keeps what it staged: the call given that same `next` object as its batch (or None) takes it, any other batch drops it."""

    def undistribute(self) -> None:
        """Back to one replica (this process's replica 0 keeps its weights and device)."""

    @property
    def weight_shapes(self) -> list:
        ...

class NonFiniteLossError:
    ...

class PinnedMemoryBlock:
    """Pinned host memory held from Python (cuda_hold_pinned_memory); freed by release() or when collected."""

    @property
    def nbytes(self) -> int:
        ...

    def release(self) -> None:
        ...

def bench_conv2d(x_shape: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], kernel_shape: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], stride: typing.SupportsInt | typing.SupportsIndex=1, padding: str='valid', relu: bool=True, repeat: typing.SupportsInt | typing.SupportsIndex=20, device: str='gpu:0') -> dict:
    """Times one conv2d layer (forward; backward with dx) on random data: mean ms per call. kernel_shape is Keras' (kh, kw, in, out)."""

def bench_dense(x_shape: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], kernel_shape: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], relu: bool=True, repeat: typing.SupportsInt | typing.SupportsIndex=20, device: str='gpu:0') -> dict:
    """Times one dense layer (forward, backward) on random data: mean ms per call."""

def bench_maxpool2d(x_shape: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], pool_size: typing.SupportsInt | typing.SupportsIndex=2, repeat: typing.SupportsInt | typing.SupportsIndex=20, device: str='gpu:0') -> dict:
    """Times one max-pooling layer (forward, backward) on random data: mean ms per call."""

def build_info() -> dict:
    """What this build of hpcnn was compiled with and against."""

def cuda_choose_conv_algorithms(offers: list, determinism: str, workspace_limit: typing.SupportsInt | typing.SupportsIndex, failed: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex]=[], what: str='conv2d', layer: str='') -> dict:
    """The CUDA backend's choice among cuDNN's algorithm offers, run on the host (needs no GPU): offers are dicts {name, deterministic, workspace[, usable, algo, math_name, status]} in cuDNN's order. Returns {order: indices to try, best first; replan_at: the workspace limit from which a preferred offer would fit (None: never); refusal: why nothing may run ('' when something may), with every offer; refusal_is_memory; message: the error a refusal raises, naming `layer` (as a model's layer sets it) and `what` (the pass and shapes)}."""

def cuda_clear_conv_plans() -> None:
    """Forgets every cuDNN plan: the next convolution of each geometry chooses its algorithm afresh."""

def cuda_compiled() -> bool:
    ...

def cuda_conv_plans(device: typing.SupportsInt | typing.SupportsIndex=0) -> list:
    """The cuDNN plans made so far on GPU `device`, one dict per convolution geometry and pass: the algorithm running and whether it is deterministic, its math type and workspace, the candidates in order (with their math types), cuDNN's heuristic answer (offers), the ones that failed at run time, whether the fused conv+bias+ReLU call is used (and fused_status: what cuDNN answered when it declined it). Empty when nothing ran there."""

def cuda_current_context_device() -> int:
    """The GPU whose CUDA context is current on the calling thread, or -1 when it has none (asked without creating one)."""

def cuda_devices(with_free_memory: bool=False) -> list[CudaDeviceInfo]:
    """Visible CUDA devices (empty when none is usable), listed without creating a CUDA context. with_free_memory=True also fills free_memory, which creates this process's context on every device."""

def cuda_force_conv_failures(algorithms: collections.abc.Sequence[str], fused: bool=False) -> None:
    """For tests: the cuDNN algorithms named (e.g. 'CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM') fail as if cuDNN answered CUDNN_STATUS_NOT_SUPPORTED when run, and with fused=True so does the fused conv+bias+ReLU call. Replaces the previous marks; ([], False) clears them."""

def cuda_free_memory(device: typing.SupportsInt | typing.SupportsIndex) -> int:
    """Free bytes on GPU `device` (creates this process's context there if it has none; 0 if it cannot be asked)."""

def cuda_get_determinism() -> str:
    """The determinism setting: 'required', 'warn' or 'any' (see cuda_set_determinism)."""

def cuda_get_tf32() -> bool:
    """Whether TF32 is allowed (see cuda_set_tf32)."""

def cuda_hold_memory(nbytes: typing.SupportsInt | typing.SupportsIndex, device: str='gpu:0') -> DeviceMemoryBlock:
    """Allocates and holds `nbytes` of memory on a GPU (MemoryError naming the sizes when it is not there): for tests and checks of what happens when the GPU is nearly full."""

def cuda_hold_pinned_memory(nbytes: typing.SupportsInt | typing.SupportsIndex, device: typing.SupportsInt | typing.SupportsIndex=0) -> PinnedMemoryBlock:
    """Allocates and holds `nbytes` of page-locked host memory for GPU `device`, as the loader and the stager do: for tests of the pinned-memory helpers."""

def cuda_kernel_selftest() -> list:
    """Runs the CUDA kernels' index arithmetic and the cuBLAS/cuDNN call layouts on the host against the CPU ops (no GPU needed). Returns [(check, error, tolerance)]."""

def cuda_prefetch_check(x: typing.Annotated[numpy.typing.ArrayLike, numpy.float32], device: typing.SupportsInt | typing.SupportsIndex=0) -> numpy.ndarray:
    """relu(x) computed on GPU `device` after an asynchronous upload from pinned memory (a test of the prefetch path: copy stream, event, compute stream)."""

def cuda_primary_context_active(device: typing.SupportsInt | typing.SupportsIndex) -> bool:
    """Whether this process holds a CUDA context on GPU `device`, asked without creating one (False without a driver)."""

def cuda_set_determinism(mode: str) -> None:
    """Which cuDNN convolution algorithms may be used: 'required' (deterministic only; an op that finds none within its workspace refuses with an error; the default), 'warn' (a non-deterministic one when no deterministic one fits, with a RuntimeWarning) or 'any' (the fastest that fits). Process-wide."""

def cuda_set_tf32(enabled: bool) -> None:
    """Allow TF32 tensor-core math for float32 convolutions and matrix products on GPUs of compute capability >= 8.0 (default: on, as in TensorFlow). Process-wide."""

def cuda_sm_clock_khz(device: typing.SupportsInt | typing.SupportsIndex=0) -> int:
    """Peak SM clock of GPU `device` in kHz (0 when unknown)."""

def cuda_synchronize(device: typing.SupportsInt | typing.SupportsIndex=0) -> None:
    """Wait for all work queued on the GPU's compute stream."""

def cuda_tf32_supported(device: typing.SupportsInt | typing.SupportsIndex=0) -> bool:
    """Whether GPU `device` has TF32 tensor cores (compute capability >= 8.0)."""

def cuda_unavailable_reason() -> str:
    """Why no GPU is usable, or '' when at least one is."""

def default_num_threads() -> int:
    ...

def default_num_threads_source() -> str:
    """Where the default thread count comes from: 'HPCNN_NUM_THREADS=n', 'SLURM_CPUS_PER_TASK=n' or 'the affinity mask' (read from the environment now)."""

def get_num_threads() -> int:
    ...

def layer_output_shape(layer: dict, input_shapes: collections.abc.Sequence[collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex]]) -> list[int]:
    """The per-sample output shape of one Keras layer (its config, as Model takes them) whose inputs have these per-sample shapes (a merge layer takes them all; ValueError when they do not fit): a layer's output shape when called on symbolic tensors."""

def layer_weight_shapes(layer: dict, input_shapes: collections.abc.Sequence[collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex]]) -> list:
    """The weights of one Keras layer (its config) on inputs of these per-sample shapes: (name, shape, trainable) each, in get_weights' order; trainable False for a weight no optimizer steps (BatchNormalization's moving_mean and moving_variance)."""

def learning_rate_schedule_value(config: dict, step: typing.SupportsInt | typing.SupportsIndex) -> float:
    """The learning rate a schedule (config: class_name and Keras' arguments, as optimizers send it) gives the step taken after `step` steps: the C++ code a training step runs."""

def max_num_threads() -> int:
    ...

def normalize_device(spec: object, check_usable: bool=True) -> str:
    """'cpu', 'gpu', 'GPU:1', 'cuda:0', '/device:GPU:0', ... -> 'cpu' or 'gpu:N'. ValueError for a name that is not a device; with check_usable, RuntimeError saying why a GPU asked for cannot be used."""

def reset_transfer_stats() -> None:
    ...

def set_num_threads(n: typing.SupportsInt | typing.SupportsIndex) -> None:
    ...

def transfer_stats() -> dict:
    """Host<->device copies made so far (counts and bytes)."""
