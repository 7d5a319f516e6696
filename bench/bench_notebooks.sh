#!/usr/bin/env bash
# Notebooks on this node as a student's Run All takes them (issue 24): each named notebook run
# headless with synthetic data and its other defaults, twice, with an empty data directory first
# (run 1 makes and writes the dataset, run 2 reuses it). `hpcnn notebook run` prints the time of
# each cell; this prints the totals.
#   bash bench/bench_notebooks.sh [01 03 ...]           # default: 01 03
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export HPCNN_DATA_DIR="$work/data"
[ $# -gt 0 ] || set -- 01 03
for n in "$@"; do
  for run in 1 2; do
    hpcnn notebook run "$n" --synthetic --out "$work/$n-$run" > "$work/$n-$run.log" 2>&1 \
      || { tail -20 "$work/$n-$run.log"; exit 1; }
    echo "notebook $n, run $run ($([ $run = 1 ] && echo 'makes the dataset' || echo 'reuses it')): $(grep '^done in' "$work/$n-$run.log" | sed 's/: .*//')"
  done
done
