#!/bin/bash
# Submit the tutorial-CNN benchmark over CPU thread counts and GPU partitions, then collect:
#   bash slurm/bench-sweep.sh                 # submits; results/bench.csv grows one row per run
#   hpcnn collect results/all.csv results/bench.csv --plot results/bench.png   # when all are done
set -euo pipefail
mkdir -p results
CPU_PARTITION=${CPU_PARTITION:-cpu}
GPU_PARTITIONS=${GPU_PARTITIONS:-gpu}
for c in 1 2 4 8 16; do
  sbatch --partition="$CPU_PARTITION" --cpus-per-task="$c" --job-name="hpcnn-bench-${c}c" --time=00:15:00 \
    --output="results/%x-%j.out" --wrap="hpcnn bench --device cpu --csv results/bench.csv --label cpu-${c}c"
done
for p in $GPU_PARTITIONS; do
  sbatch --partition="$p" --gres=gpu:1 --cpus-per-task=8 --job-name="hpcnn-bench-$p" --time=00:15:00 \
    --output="results/%x-%j.out" --wrap="hpcnn bench --device gpu --csv results/bench.csv --label $p"
done
