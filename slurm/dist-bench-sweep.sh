#!/bin/bash
# The data-parallel benchmark sweep: GPU type x GPU count (1, 2, 4) x where the data is read from
# (the shared $SCRATCH or node-local $LOCAL / $TMPDIR), one job each, every run appending a row
# (time per step, img/s, uncertainty, jitter, replicas) to results/dist.csv:
#   DATA=$SCRATCH/cifar10.hdf5 bash slurm/dist-bench-sweep.sh
#   hpcnn collect results/dist-all.csv results/dist.csv --plot results/dist.png   # when all are done
# GPU_PARTITIONS names the partitions (one per GPU type); COUNTS the GPU counts; STAGING "scratch
# local". DATA: the HDF5 file on the shared file system ($SCRATCH/cifar10.hdf5 when unset and
# $SCRATCH exists); "scratch" jobs read it there (staging off: LOCAL and TMPDIR emptied for the
# job), "local" jobs copy it to the node's $LOCAL (else $TMPDIR) first (slurm/multi-gpu.sbatch).
#   DRY_RUN=1 bash slurm/dist-bench-sweep.sh    prints the sbatch commands, submits nothing (no
#                                               Slurm needed)
# KIND=cpu: the same sweep on CPU nodes of CPU_PARTITION (default cpu): COUNTS ranks on one node
# (default 1 2 4), CPUS_PER_RANK cores each (default 8), slurm/multi-node.sbatch with KIND=cpu; DATA
# may then be unset (SYNTHETIC=1, or CIFAR-10 from the data dir).
# Without Slurm (no sbatch, no DRY_RUN) it runs one configuration here: one rank, the GPU if one is
# usable, else the CPU.   QUICK=1 bash slurm/dist-bench-sweep.sh   (2,000 generated images)
set -euo pipefail
mkdir -p results
GPU_PARTITIONS=${GPU_PARTITIONS:-gpu}
COUNTS=${COUNTS:-1 2 4}
STAGING=${STAGING:-scratch local}
HERE=$(cd "$(dirname "$0")" && pwd)
DATA=${DATA:-${SCRATCH:+$SCRATCH/cifar10.hdf5}}

KIND=${KIND:-gpu}
case "$KIND" in gpu|cpu) ;; *) echo "KIND: 'gpu' or 'cpu', got '$KIND'" >&2; exit 2 ;; esac

if [ "${DRY_RUN:-0}" = 1 ] || command -v sbatch >/dev/null 2>&1; then
  if [ -z "$DATA" ] && [ "$KIND" = gpu ]; then
    echo "set DATA=<the HDF5 file on \$SCRATCH> (e.g. made by hpcnn convert cifar10): the sweep compares reading it" \
         "from there with reading a node-local copy" >&2
    exit 2
  fi
  SBATCH=(sbatch)
  [ "${DRY_RUN:-0}" = 1 ] && SBATCH=(echo sbatch)
  if [ "$KIND" = cpu ]; then
    CPUS_PER_RANK=${CPUS_PER_RANK:-8}
    for n in $COUNTS; do
      for s in $STAGING; do
        case "$s" in
          local) stage_env="ALL${DATA:+,DATA=$DATA}" ;;
          scratch) stage_env="ALL${DATA:+,DATA=$DATA},LOCAL=,TMPDIR=" ;;
          *) echo "STAGING: 'scratch' or 'local', got '$s'" >&2; exit 2 ;;
        esac
        # --gres=none: multi-node.sbatch's own #SBATCH lines ask for GPUs; -c and the rank count are the sweep's.
        "${SBATCH[@]}" --partition="${CPU_PARTITION:-cpu}" --nodes=1 --gres=none --ntasks-per-node="$n" \
          --cpus-per-task="$CPUS_PER_RANK" --job-name="hpcnn-dist-cpu-${n}rank-$s" --time=00:30:00 \
          --output="results/%x-%j.out" --export="$stage_env,KIND=cpu,LABEL=cpu-${n}rank-$s" "$HERE/multi-node.sbatch"
      done
    done
    GPU_PARTITIONS=""   # no GPU jobs
  fi
  for p in $GPU_PARTITIONS; do
    for n in $COUNTS; do
      for s in $STAGING; do
        case "$s" in
          local) stage_env="ALL,DATA=$DATA" ;;                      # multi-gpu.sbatch copies DATA to $LOCAL / $TMPDIR
          scratch) stage_env="ALL,DATA=$DATA,LOCAL=,TMPDIR=" ;;     # no staging directory: read where DATA is
          *) echo "STAGING: 'scratch' or 'local', got '$s'" >&2; exit 2 ;;
        esac
        "${SBATCH[@]}" --partition="$p" --gres="gpu:$n" --ntasks-per-node="$n" --job-name="hpcnn-dist-$p-${n}gpu-$s" \
          --time=00:30:00 --output="results/%x-%j.out" --export="$stage_env,LABEL=$p-${n}gpu-$s" \
          "$HERE/multi-gpu.sbatch"
      done
    done
  done
  [ "${DRY_RUN:-0}" = 1 ] && exit 0
  echo "submitted; when all are done: hpcnn collect results/dist-all.csv results/dist.csv --plot results/dist.png"
  exit 0
fi

echo "sbatch not found: one configuration here"
LABEL=${LABEL:-local-1rank} bash "$HERE/multi-gpu.sbatch"
hpcnn collect results/dist-all.csv results/dist.csv
