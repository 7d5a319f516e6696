"""csrc/nn: lowering, the step plan, memory plan, fusions and training steps against references."""
