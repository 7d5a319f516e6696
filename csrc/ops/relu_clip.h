// Keras' ReLU layer in its general form, ReLU(max_value, negative_slope, threshold) (what
// keras.activations.relu computes):
//   a = x if x > threshold else 0     (threshold 0: max(x, 0))
//   a = clip(a, 0, max_value)          (only with a max_value)
//   y = a - negative_slope * max(threshold - x, 0)
// dx = dy * f'(x), f' from x (0 at the kinks, as TensorFlow takes them). The plain, ReLU6 and leaky
// forms take the element-wise activations of activation.h; this op serves every other combination.
// Per element ew::relu_clip / relu_clip_grad (elementwise.h). CPU: relu_clip_cpu.cpp; CUDA:
// relu_clip_cuda.cu.
#pragma once

namespace hpcnn {

struct ReluClipParams {
  float negative_slope = 0.f;
  float threshold = 0.f;
  bool has_max = false;
  float max_value = 0.f;
};

namespace cpu {
void relu_clip_forward(const ReluClipParams& p, long long count, const float* x, float* y);
void relu_clip_backward(const ReluClipParams& p, long long count, const float* x, const float* dy, float* dx);
}  // namespace cpu

namespace cuda {
void relu_clip_forward(int device, const ReluClipParams& p, long long count, const float* x, float* y);
void relu_clip_backward(int device, const ReluClipParams& p, long long count, const float* x, const float* dy,
                        float* dx);
}  // namespace cuda

}  // namespace hpcnn
