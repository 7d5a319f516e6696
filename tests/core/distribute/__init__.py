"""csrc/distribute: data parallelism in one process and under mpirun."""
