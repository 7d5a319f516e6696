#!/bin/bash
# The data-parallel benchmark sweep: GPU type x GPU count (1, 2, 4) x where the data is read from
# (the shared $SCRATCH or node-local $LOCAL / $TMPDIR), one job each, every run appending a row
# (time per step, img/s, uncertainty, jitter, replicas) to results/dist.csv:
#   DATA=$SCRATCH/cifar10.hdf5 bash slurm/dist-bench-sweep.sh
#   hpcnn collect results/dist-all.csv results/dist.csv --plot results/dist.png   # when all are done
# GPU_PARTITIONS names the partitions (one per GPU type); COUNTS the GPU counts; STAGING "scratch
# local". Without Slurm (no sbatch) it runs one configuration here: one rank, the GPU if one is
# usable, else the CPU.   QUICK=1 bash slurm/dist-bench-sweep.sh   (2,000 generated images)
set -euo pipefail
mkdir -p results
GPU_PARTITIONS=${GPU_PARTITIONS:-gpu}
COUNTS=${COUNTS:-1 2 4}
STAGING=${STAGING:-scratch local}
HERE=$(cd "$(dirname "$0")" && pwd)

if command -v sbatch >/dev/null 2>&1; then
  for p in $GPU_PARTITIONS; do
    for n in $COUNTS; do
      for s in $STAGING; do
        if [ "$s" = local ]; then stage_env="ALL"; else stage_env="ALL,LOCAL=,TMPDIR="; fi
        sbatch --partition="$p" --gres="gpu:$n" --ntasks-per-node="$n" --job-name="hpcnn-dist-$p-${n}gpu-$s" \
          --time=00:30:00 --output="results/%x-%j.out" --export="$stage_env,LABEL=$p-${n}gpu-$s" \
          "$HERE/multi-gpu.sbatch"
      done
    done
  done
  echo "submitted; when all are done: hpcnn collect results/dist-all.csv results/dist.csv --plot results/dist.png"
  exit 0
fi

echo "sbatch not found: one configuration here"
LABEL=${LABEL:-local-1rank} bash "$HERE/multi-gpu.sbatch"
hpcnn collect results/dist-all.csv results/dist.csv
