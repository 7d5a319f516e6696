#!/bin/bash
# The tutorial-CNN benchmark over CPU thread counts and GPU partitions, into one CSV:
#   bash slurm/bench-sweep.sh                 # with Slurm: submits one job per configuration
#   hpcnn collect results/all.csv results/bench.csv --plot results/bench.png   # when all are done
# Without Slurm (no sbatch), it runs the CPU sweep here, one configuration after another (thread
# counts up to the CPUs this shell may use), and the GPU one if a GPU is usable, then collects.
#   QUICK=1 bash slurm/bench-sweep.sh         # a short check (2 tiny steps per configuration)
#   GPU_PARTITIONS= bash slurm/bench-sweep.sh # a cluster without GPUs: the CPU jobs only
set -euo pipefail
mkdir -p results
CPU_PARTITION=${CPU_PARTITION:-cpu}
GPU_PARTITIONS=${GPU_PARTITIONS-gpu}   # set but empty: no GPU jobs
THREADS=${THREADS:-1 2 4 8 16}
if [ "${QUICK:-0}" = 1 ]; then
  BENCH_ARGS=${BENCH_ARGS:---batch 32 --steps 2 --warmup 1}
fi

if command -v sbatch >/dev/null 2>&1; then
  for c in $THREADS; do
    sbatch --partition="$CPU_PARTITION" --cpus-per-task="$c" --job-name="hpcnn-bench-${c}c" --time=00:15:00 \
      --output="results/%x-%j.out" \
      --wrap="hpcnn bench --device cpu --csv results/bench.csv --label cpu-${c}c ${BENCH_ARGS:-}"
  done
  for p in $GPU_PARTITIONS; do
    sbatch --partition="$p" --gres=gpu:1 --cpus-per-task=8 --job-name="hpcnn-bench-$p" --time=00:15:00 \
      --output="results/%x-%j.out" \
      --wrap="hpcnn bench --device gpu --csv results/bench.csv --label $p ${BENCH_ARGS:-}"
  done
  exit 0
fi

# ---- no Slurm: run here
if command -v conda >/dev/null 2>&1; then
  # conda's activation scripts read variables that may be unset (conda's own and those of
  # packages' activate.d hooks): `set -u` off around them, on again after.
  set +u
  source "$(conda info --base)/etc/profile.d/conda.sh"
  conda activate "${HPCNN_CONDA_ENV:-hpcnn}" || echo "no conda env '${HPCNN_CONDA_ENV:-hpcnn}': using what is on PATH"
  set -u
fi
command -v hpcnn >/dev/null || { echo "hpcnn is not on PATH: activate the environment where it was installed" >&2; exit 1; }
export OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
cpus=$(python3 -c 'import os; print(len(os.sched_getaffinity(0)))')
echo "sbatch not found: running the sweep here, one configuration after another ($cpus CPUs available)"
for c in $THREADS; do
  if [ "$c" -gt "$cpus" ]; then
    echo "skipping $c threads: more than the $cpus CPUs of this shell"
    continue
  fi
  # shellcheck disable=SC2086
  hpcnn bench --device cpu --threads "$c" --csv results/bench.csv --label "local-${c}c" ${BENCH_ARGS:-}
done
no_gpu=$(hpcnn devices | sed -n 's/^no GPU: //p')
if [ -z "$no_gpu" ]; then
  # shellcheck disable=SC2086
  hpcnn bench --device gpu --csv results/bench.csv --label local-gpu ${BENCH_ARGS:-}
else
  echo "no GPU run: $no_gpu"
fi
hpcnn collect results/all.csv results/bench.csv
