"""``hpcnn.config.list_physical_devices`` for code written against ``tf.config``."""
from .devices import list_physical_devices

__all__ = ["list_physical_devices"]
