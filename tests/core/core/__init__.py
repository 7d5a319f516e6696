"""csrc/core: devices and the thread pool."""
