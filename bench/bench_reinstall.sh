#!/usr/bin/env bash
# A second install from the same clone (issue 24): a fresh clone of this repository and a fresh venv,
# README's way (the build requirements first, then `pip install --no-build-isolation`), installed
# twice; prints each install's wall time and how many objects it compiled. --isolated does the same
# with pip's default isolated build (what README gave before: every install compiles everything).
#   bash bench/bench_reinstall.sh [--isolated]          # HPCNN_CUDA=OFF for a CPU-only build
set -euo pipefail
mode=${1:-}
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git clone -q "$repo" "$work/clone"
python3 -m venv "$work/venv"
pip="$work/venv/bin/pip"
"$pip" install -q --upgrade pip
if [ "$mode" = --isolated ]; then
  flags=()
else
  python3 -c 'import sys, tomllib; print("\n".join(tomllib.load(open(sys.argv[1], "rb"))["build-system"]["requires"] + ["ninja"]))' \
    "$repo/pyproject.toml" > "$work/build-requirements.txt"
  "$pip" install -q -r "$work/build-requirements.txt"
  flags=(--no-build-isolation)
fi
echo "commit $(git -C "$repo" rev-parse --short HEAD), HPCNN_CUDA=${HPCNN_CUDA:-AUTO}, ${mode:---no-build-isolation}, $(nproc) CPUs"
for run in 1 2; do
  start=$(date +%s%N)
  (cd "$work/clone" && "$pip" install -v "${flags[@]}" . > "$work/install$run.log" 2>&1) \
    || { tail -30 "$work/install$run.log"; exit 1; }
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  compiled=$(grep -cE "Building (CXX|CUDA) object" "$work/install$run.log" || true)
  printf 'install %d: %d.%d s, %d objects compiled\n' "$run" $((ms / 1000)) $((ms % 1000 / 100)) "$compiled"
done
