"""The CUDA backend: GPU against CPU (marked gpu, skipped with the reason without one) and its host-side switches."""
