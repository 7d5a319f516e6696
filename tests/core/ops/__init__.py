"""csrc/ops: every operator, forward and backward, against float64 references."""
