# Generated from the installed hpcnn._core by tools/gen_core_stubs.py: do not edit by hand.
# After changing csrc/bindings/ and reinstalling, regenerate with: python tools/gen_core_stubs.py
"""operators on NumPy arrays (tests and benchmarks use these)"""
import collections.abc
import numpy
import numpy.typing
import typing

def accumulate(dst: object, src: object, device: str='cpu') -> numpy.ndarray:
    """dst + src, computed as the in-place dst += src."""

def activation_backward(x: object, y: object, dy: object, activation: str, alpha: typing.SupportsFloat | typing.SupportsIndex=0.0, device: str='cpu', repeat: typing.SupportsInt | typing.SupportsIndex=1) -> numpy.ndarray:
    """dx = dy * f'(x); y = f(x) from activation_forward."""

def activation_forward(x: object, activation: str, alpha: typing.SupportsFloat | typing.SupportsIndex=0.0, device: str='cpu', repeat: typing.SupportsInt | typing.SupportsIndex=1) -> numpy.ndarray:
    """An element-wise activation by Keras name ('tanh', 'gelu', 'gelu_approximate', 'leaky_relu' with alpha = the negative slope, 'elu' with alpha, ...)."""

def adam_step(params: object, grads: object, m: object, v: object, lr: typing.SupportsFloat | typing.SupportsIndex=0.001, beta_1: typing.SupportsFloat | typing.SupportsIndex=0.9, beta_2: typing.SupportsFloat | typing.SupportsIndex=0.999, epsilon: typing.SupportsFloat | typing.SupportsIndex=1e-07, t: typing.SupportsInt | typing.SupportsIndex=1, sizes: object=None, decay: object=None, weight_decay: typing.SupportsFloat | typing.SupportsIndex=0.0, clipvalue: typing.SupportsFloat | typing.SupportsIndex=0.0, device: str='cpu', repeat: typing.SupportsInt | typing.SupportsIndex=1) -> tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]:
    """Keras' Adam step; weight_decay: decoupled (w -= lr * weight_decay * w first), on the variables whose `decay` flag is set (all by default); clipvalue > 0 clamps the gradient. Returns (params, m, v)."""

def add(xs: list, device: str='cpu') -> numpy.ndarray:
    """xs[0] + xs[1] + ... (two or more arrays of one shape)."""

def augment(x: object, config: dict, training: bool=True, seed: typing.SupportsInt | typing.SupportsIndex=0, stream: typing.SupportsInt | typing.SupportsIndex=0, first_row: typing.SupportsInt | typing.SupportsIndex=0, rows: object=None, scale: collections.abc.Sequence[typing.SupportsFloat | typing.SupportsIndex]=[], shift: collections.abc.Sequence[typing.SupportsFloat | typing.SupportsIndex]=[], padding: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex]=[], device: str='cpu', repeat: typing.SupportsInt | typing.SupportsIndex=1) -> numpy.ndarray:
    ...

def avgpool2d_backward(x_shape: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], dy: object, pool_size: object=2, strides: object=None, padding: str='valid', device: str='cpu', repeat: typing.SupportsInt | typing.SupportsIndex=1) -> numpy.ndarray:
    ...

def avgpool2d_forward(x: object, pool_size: object=2, strides: object=None, padding: str='valid', device: str='cpu', repeat: typing.SupportsInt | typing.SupportsIndex=1) -> numpy.ndarray:
    ...

def batchnorm_backward_inference(y: object, dy: object, gamma: object, moving_variance: object, epsilon: typing.SupportsFloat | typing.SupportsIndex=0.001, relu: bool=False, device: str='cpu') -> numpy.ndarray:
    ...

def batchnorm_backward_training(x: object, y: object, dy: object, gamma: object, mean: object, invstd: object, epsilon: typing.SupportsFloat | typing.SupportsIndex=0.001, relu: bool=False, need_dx: bool=True, device: str='cpu', repeat: typing.SupportsInt | typing.SupportsIndex=1) -> tuple[object, numpy.ndarray, numpy.ndarray]:
    """(dx or None, dgamma, dbeta) with the forward's batch mean and invstd."""

def batchnorm_forward_inference(x: object, gamma: object, beta: object, moving_mean: object, moving_variance: object, epsilon: typing.SupportsFloat | typing.SupportsIndex=0.001, relu: bool=False, device: str='cpu', repeat: typing.SupportsInt | typing.SupportsIndex=1, residual: object=None) -> numpy.ndarray:
    ...

def batchnorm_forward_training(x: object, gamma: object, beta: object, epsilon: typing.SupportsFloat | typing.SupportsIndex=0.001, relu: bool=False, device: str='cpu', repeat: typing.SupportsInt | typing.SupportsIndex=1, residual: object=None) -> tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray, numpy.ndarray]:
    """Batch norm over the last axis with the batch's statistics: (y, mean, var (biased), invstd). gamma/beta may be None; residual (x's shape) is added before the ReLU."""

def batchnorm_inference_param_gradients(x: object, y: object, dy: object, moving_mean: object, moving_variance: object, epsilon: typing.SupportsFloat | typing.SupportsIndex=0.001, relu: bool=False, device: str='cpu') -> tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]:
    """(dgamma, dbeta, g) of a trainable batch normalization run in inference mode: the moving statistics as the constants; g is dy masked by y > 0 with relu."""

def batchnorm_update_moving(moving_mean: object, moving_variance: object, mean: object, var: object, momentum: typing.SupportsFloat | typing.SupportsIndex=0.99, device: str='cpu') -> tuple[numpy.ndarray, numpy.ndarray]:
    """Keras' moving-average update: returns new (moving_mean, moving_variance)."""

def clip_scales(grads: object, sizes: object=None, clipnorm: typing.SupportsFloat | typing.SupportsIndex=1.0, global_norm: bool=False, device: str='cpu') -> numpy.ndarray:
    """Keras' clipnorm (or global_clipnorm) factor of each variable's gradient."""

def concatenate(xs: list, axis: typing.SupportsInt | typing.SupportsIndex=-1, device: str='cpu') -> numpy.ndarray:
    """The arrays side by side along `axis` (not 0, the batch axis)."""

def conv2d_backward(x: object, kernel: object, y: object, dy: object, strides: object=1, padding: str='valid', relu: bool=False, need_dx: bool=True, device: str='cpu', repeat: typing.SupportsInt | typing.SupportsIndex=1, bias: bool=True, add_to: object=None) -> tuple[object, numpy.ndarray, object]:
    """Returns (dx or None, dw, db or None); bias=False: a convolution without bias (no db). add_to (x's shape): dx is add_to + the input gradient, added in the op's output stage (how a model gathers the gradient of a tensor that several layers read)."""

def conv2d_forward(x: object, kernel: object, bias: object, strides: object=1, padding: str='valid', relu: bool=False, device: str='cpu', repeat: typing.SupportsInt | typing.SupportsIndex=1, residual: object=None) -> numpy.ndarray:
    """bias None: no bias (use_bias=False). residual (the output's shape): added before the ReLU, y = act(conv + bias + residual)."""

def conv2d_kernel_layout(device: str) -> str:
    """The conv2d kernel layout the backend of `device` computes with, and a model on it holds: 'HWIO' (kh, kw, in, out; Keras' own) on the CPU, 'OHWI' (out, kh, kw, in; cuDNN's NHWC filter) on a GPU. Needs no GPU."""

def conv_bn_fold(kernel: object, bias: object, gamma: object, beta: object, moving_mean: object, moving_variance: object, epsilon: typing.SupportsFloat | typing.SupportsIndex, device: str='cpu') -> tuple[numpy.ndarray, numpy.ndarray]:
    """A BatchNormalization in inference mode folded into the convolution before it: (kernel, bias) such that conv2d_forward with them is the convolution followed by the normalization. kernel in Keras' HWIO; bias, gamma, beta None: none (0, 1, 0)."""

def convert_conv2d_kernel(kernel: object, from_layout: str, to_layout: str) -> numpy.ndarray:
    """A conv2d kernel converted between 'HWIO' and 'OHWI' on the host: the conversion a model applies in get_weights, set_weights and when it moves between the CPU and a GPU."""

def copy(x: object, device: str='cpu') -> numpy.ndarray:
    """A copy of x made on the device (its compute stream on a GPU)."""

def decode_u8(x: typing.Annotated[numpy.typing.ArrayLike, numpy.uint8], scale: collections.abc.Sequence[typing.SupportsFloat | typing.SupportsIndex], shift: collections.abc.Sequence[typing.SupportsFloat | typing.SupportsIndex], device: str='cpu') -> numpy.ndarray:
    ...

def dense_backward(x: object, kernel: object, y: object, dy: object, relu: bool=False, need_dx: bool=True, device: str='cpu', repeat: typing.SupportsInt | typing.SupportsIndex=1, bias: bool=True) -> tuple[object, numpy.ndarray, object]:
    """Returns (dx or None, dw, db or None); bias=False: no bias (no db)."""

def dense_forward(x: object, kernel: object, bias: object, relu: bool=False, device: str='cpu', repeat: typing.SupportsInt | typing.SupportsIndex=1) -> numpy.ndarray:
    ...

def depthwise_conv2d_backward(x: object, kernel: object, dy: object, strides: object=1, padding: str='valid', dilation_rate: object=1, need_dx: bool=True, bias: bool=True, device: str='cpu', repeat: typing.SupportsInt | typing.SupportsIndex=1) -> tuple[object, numpy.ndarray, object]:
    """Returns (dx or None, dw, db or None) of depthwise_conv2d_forward."""

def depthwise_conv2d_forward(x: object, kernel: object, bias: object, strides: object=1, padding: str='valid', dilation_rate: object=1, device: str='cpu', repeat: typing.SupportsInt | typing.SupportsIndex=1) -> numpy.ndarray:
    """Keras' DepthwiseConv2D: x (n, h, w, c), kernel (kh, kw, c, depth_multiplier) on every device, bias (c * depth_multiplier,) or None -> (n, oh, ow, c * depth_multiplier)."""

def dropout_backward(dy: object, rate: typing.SupportsFloat | typing.SupportsIndex, seed: typing.SupportsInt | typing.SupportsIndex=0, stream: typing.SupportsInt | typing.SupportsIndex=0, device: str='cpu', repeat: typing.SupportsInt | typing.SupportsIndex=1, offset: typing.SupportsInt | typing.SupportsIndex=0) -> numpy.ndarray:
    ...

def dropout_forward(x: object, rate: typing.SupportsFloat | typing.SupportsIndex, seed: typing.SupportsInt | typing.SupportsIndex=0, stream: typing.SupportsInt | typing.SupportsIndex=0, device: str='cpu', repeat: typing.SupportsInt | typing.SupportsIndex=1, offset: typing.SupportsInt | typing.SupportsIndex=0) -> numpy.ndarray:
    """Inverted dropout; element i's mask is the draw of counter offset + i (a replica's first global row times the elements per row)."""

def global_pool2d_backward(x: object, y: object, dy: object, mode: str='avg', device: str='cpu') -> numpy.ndarray:
    """dx of global_pool2d_forward (y is read by 'max' only)."""

def global_pool2d_forward(x: object, mode: str='avg', device: str='cpu') -> numpy.ndarray:
    """(N,H,W,C) -> (N,C): mode 'avg' or 'max'."""

def maxpool2d_backward(x: object, y: object, dy: object, pool_size: object=2, strides: object=None, padding: str='valid', device: str='cpu', repeat: typing.SupportsInt | typing.SupportsIndex=1) -> numpy.ndarray:
    ...

def maxpool2d_forward(x: object, pool_size: object=2, strides: object=None, padding: str='valid', device: str='cpu', repeat: typing.SupportsInt | typing.SupportsIndex=1) -> numpy.ndarray:
    ...

def measure_peak_gflops(threads: typing.SupportsInt | typing.SupportsIndex, seconds: typing.SupportsFloat | typing.SupportsIndex=1.0) -> float:
    """FP32 peak GFLOP/s measured by an FMA loop on min(threads, get_num_threads()) threads."""

def metric_rows(pred: object, target: object, name: str, k: typing.SupportsInt | typing.SupportsIndex=5, threshold: typing.SupportsFloat | typing.SupportsIndex=0.5, device: str='cpu') -> float:
    """The sum over rows of a metric (Keras' function name) of pred against target."""

def multiply_backward(a: object, b: object, dy: object, device: str='cpu') -> tuple[numpy.ndarray, numpy.ndarray]:
    """(da, db) of multiply_forward: dy times the other input, summed over the axes each was broadcast along."""

def multiply_forward(a: object, b: object, device: str='cpu', repeat: typing.SupportsInt | typing.SupportsIndex=1) -> numpy.ndarray:
    """a * b with Keras' broadcasting (each axis equal or 1; the first, the batch, never broadcast)."""

def normalization_constants(mean: object, variance: object, epsilon: typing.SupportsFloat | typing.SupportsIndex=1e-07, device: str='cpu') -> tuple[numpy.ndarray, numpy.ndarray]:
    """Keras' Normalization as (scale, offset) for scale_shift_forward: 1 / max(sqrt(variance), epsilon), -mean * scale."""

def relu_backward(y: object, dy: object, device: str='cpu') -> numpy.ndarray:
    ...

def relu_clip(x: object, dy: object, max_value: object=None, negative_slope: typing.SupportsFloat | typing.SupportsIndex=0.0, threshold: typing.SupportsFloat | typing.SupportsIndex=0.0, device: str='cpu') -> tuple[numpy.ndarray, object]:
    """Keras' ReLU(max_value, negative_slope, threshold): (y, dx or None when dy is None)."""

def relu_forward(x: object, device: str='cpu') -> numpy.ndarray:
    ...

def rmsprop_step(params: object, grads: object, velocity: object, momentum_buffer: object, average_gradient: object, lr: typing.SupportsFloat | typing.SupportsIndex=0.001, rho: typing.SupportsFloat | typing.SupportsIndex=0.9, momentum: typing.SupportsFloat | typing.SupportsIndex=0.0, epsilon: typing.SupportsFloat | typing.SupportsIndex=1e-07, centered: bool=False, sizes: object=None, decay: object=None, weight_decay: typing.SupportsFloat | typing.SupportsIndex=0.0, clipvalue: typing.SupportsFloat | typing.SupportsIndex=0.0, device: str='cpu') -> tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray, numpy.ndarray]:
    """Keras' RMSprop step. Returns (params, velocity, momentum_buffer, average_gradient); the momentum buffer is used only with momentum > 0, the average gradient only when centered."""

def row_loss(pred: object, target: object, kind: str, from_logits: bool=False, label_smoothing: typing.SupportsFloat | typing.SupportsIndex=0.0, row_weights: object=None, grad_scale: typing.SupportsFloat | typing.SupportsIndex=1.0, device: str='cpu') -> tuple[float, numpy.ndarray]:
    """A per-row loss (mean over the last axis): returns (sum over rows of weight * loss, dloss/dpred * grad_scale)."""

def row_weights(target: object, sample_weight: object=None, class_weight: object=None, device: str='cpu') -> numpy.ndarray:
    """Per-row loss weights: sample_weight[r] * class_weight[class of row r]."""

def scale_shift_backward(dy: object, scale: object, device: str='cpu') -> numpy.ndarray:
    ...

def scale_shift_forward(x: object, scale: object, offset: object, device: str='cpu') -> numpy.ndarray:
    """y = x * scale + offset over the last axis (scale, offset: one value per channel)."""

def sgd_step(params: object, grads: object, velocity: object, lr: typing.SupportsFloat | typing.SupportsIndex=0.01, momentum: typing.SupportsFloat | typing.SupportsIndex=0.0, nesterov: bool=False, sizes: object=None, decay: object=None, weight_decay: typing.SupportsFloat | typing.SupportsIndex=0.0, clipvalue: typing.SupportsFloat | typing.SupportsIndex=0.0, device: str='cpu') -> tuple[numpy.ndarray, numpy.ndarray]:
    """Keras' SGD step (the velocity is left as given without momentum). Returns (params, velocity)."""

def softmax_backward(y: object, dy: object, device: str='cpu') -> numpy.ndarray:
    ...

def softmax_cross_entropy(logits: object, target: object, grad_scale: typing.SupportsFloat | typing.SupportsIndex=1.0, device: str='cpu', repeat: typing.SupportsInt | typing.SupportsIndex=1, row_weights: object=None, label_smoothing: typing.SupportsFloat | typing.SupportsIndex=0.0) -> tuple[float, float, numpy.ndarray]:
    """Returns (loss_sum, correct, dlogits); row_weights (N,) weigh each row's loss and gradient."""

def softmax_forward(x: object, device: str='cpu') -> numpy.ndarray:
    ...

def split(dy: object, sizes: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], axis: typing.SupportsInt | typing.SupportsIndex=-1, need: collections.abc.Sequence[bool]=[], device: str='cpu') -> list:
    """concatenate's backward: the parts of dy, sizes[i] long along `axis` (None where need[i] is False)."""

def variable_sums(x: object, sizes: object=None, device: str='cpu') -> numpy.typing.NDArray[numpy.float64]:
    """Per variable: (sum |x|, sum x^2) in float64, in the fixed order both backends use."""

def weight_penalty(weights: object, grads: object, sizes: object=None, l1: object=None, l2: object=None, device: str='cpu') -> tuple[float, numpy.ndarray]:
    """The regularizers' penalty sum_v l1_v sum |w_v| + l2_v sum w_v^2 (l1, l2: a factor per variable) and grads + its gradient. Returns (penalty, grads)."""

def winograd_kernel_cache(clear: bool=False) -> dict:
    """The CPU Winograd forward pass's kept kernel transforms (ops/kernel_cache_cpu.h): entries, bytes, transforms made and calls served from an entry since the last clear. clear=True: forget them all first."""

def zero_pad2d_backward(x_shape: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], dy: object, padding: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], device: str='cpu') -> numpy.ndarray:
    ...

def zero_pad2d_forward(x: object, padding: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], device: str='cpu') -> numpy.ndarray:
    """padding: [top, bottom, left, right]."""
