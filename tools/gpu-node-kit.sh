#!/usr/bin/env bash
# hpcnn's first GPU run on a bare GPU node without network (docs/gpu.md, "A GPU node without
# network"): a short debug allocation (15 minutes), Python with PyTorch, CMake, ninja, nvcc,
# pybind11, scikit-build-core, numpy, h5py and pytest, cuDNN/cuBLAS/NCCL only as NVIDIA's pip
# wheels, and no HDF5 or CBLAS headers, no MPI. Two steps:
#
#   tools/gpu-node-kit.sh gather   where the network is (a Debian/Ubuntu machine of the node's
#                                  architecture, glibc no newer than the node's): Debian's HDF5,
#                                  OpenBLAS, libdeflate and zlib development packages unpacked
#                                  into a prefix, plus a fallback copy of their run-time
#                                  libraries, packed into ONE archive in the kit folder
#                                  (default gpu-node-kit/, ignored by git; about 10 MB)
#   tools/gpu-node-kit.sh node     on the GPU node, from this source folder with the kit folder
#                                  beside it: unpack, build for this node's GPU only
#                                  (pip --no-build-isolation, CUDA on, NCCL from the wheel, MPI
#                                  off), run slurm/gpu-selftest.sbatch (QUICK=1) and write ONE
#                                  report with the timings of each phase and the build log at its
#                                  top; the whole run stays within a time budget (default 540 s,
#                                  9 minutes) so that a second try fits a 15-minute allocation
#   tools/gpu-node-kit.sh plan     what `node` would do here, without doing it
#   tools/gpu-node-kit.sh libs     `node`'s library phase alone, on a work folder it unpacked
#
# Options: --kit DIR (the kit folder), --work DIR (where `node` unpacks and builds; default
# ${TMPDIR:-/tmp}/hpcnn-gpu-node, never inside the kit, which must stay small for the copy to
# the node), --out DIR (where the report goes; default $OUT, else the current folder),
# --python PY (the node's Python; default python3), --budget SECONDS (default 540; a second
# `node` run keeps the work folder's build and only recompiles what changed),
# --rehearse (`node` without a GPU: a CPU-only build from the prefix alone, with the system's
# own HDF5, OpenBLAS, libdeflate and zlib hidden from CMake, then the same checks and self-test,
# whose GPU sections skip; how the kit is tested where there is no GPU, bench/RESULTS.md).
set -uo pipefail

HERE="$(cd "$(dirname "$0")/.." && pwd)"
KIT="$HERE/gpu-node-kit"
WORK="${TMPDIR:-/tmp}/hpcnn-gpu-node"
OUT_DIR="${OUT:-$PWD}"
PY="python3"
BUDGET=540
REHEARSE=0
ARCHIVE_NAME="hpcnn-node-prefix.tar.xz"
MULTIARCH="x86_64-linux-gnu"

# The development packages hpcnn's build links (CMakeLists.txt: HDF5's C API, a CBLAS, zlib,
# libdeflate) and the libraries they themselves ship. Everything else their libraries need at run
# time (libcurl and libcrypto for HDF5's S3 driver, libgfortran for OpenBLAS' LAPACK, ...) goes
# into the fallback folder, copied from the gathering machine, and is used on the node only for
# what the node lacks: a library the node has is never shadowed by an older copy.
PACKAGES=(libhdf5-dev libhdf5-103-1 libsz2 libaec0 libaec-dev
          libopenblas-dev libopenblas-pthread-dev libopenblas0-pthread
          libdeflate0 libdeflate-dev zlib1g-dev)
# Never copied into the fallback: the C library and the compiler's run time, which the node has
# (newer) and which must come from one place only.
SYSTEM_LIBS='^(libc|libm|libdl|libpthread|librt|libresolv|libutil|ld-linux-x86-64|linux-vdso|libgcc_s|libstdc\+\+)\.so'

usage() { awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; }
die() { echo "gpu-node-kit: $*" >&2; exit 2; }
now() { date +%s; }

CMD="${1:-}"
[ $# -gt 0 ] && shift
while [ $# -gt 0 ]; do
  case "$1" in
    --kit) KIT="$2"; shift 2 ;;
    --work) WORK="$2"; shift 2 ;;
    --out) OUT_DIR="$2"; shift 2 ;;
    --python) PY="$2"; shift 2 ;;
    --budget) BUDGET="$2"; shift 2 ;;
    --rehearse) REHEARSE=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
ARCHIVE="$KIT/$ARCHIVE_NAME"
PREFIX="$WORK/prefix"
LIBDIR="$PREFIX/usr/lib/$MULTIARCH"

# ---------------------------------------------------------------------------------------- gather
# The shared libraries the given files need that ldd resolves outside the prefix ("soname path"
# per line), the C library and the compiler run time left out.
outside_deps() {
  LD_LIBRARY_PATH="$LIBDIR:$LIBDIR/openblas-pthread:$LIBDIR/hdf5/serial" ldd "$@" 2>/dev/null \
    | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | grep -Ev "$SYSTEM_LIBS" | grep -v " $PREFIX/" | sort -u
}

gather() {
  command -v apt-get >/dev/null || die "gather needs apt-get (a Debian or Ubuntu machine with network)"
  command -v dpkg-deb >/dev/null || die "gather needs dpkg-deb"
  local stage="$WORK/gather" t0; t0=$(now)
  rm -rf "$stage" && mkdir -p "$stage/debs" "$KIT" || die "cannot write $stage or $KIT"
  echo "== downloading ${#PACKAGES[@]} packages (apt-get download: the system is not changed)"
  (cd "$stage/debs" && apt-get download "${PACKAGES[@]}") || die "apt-get download failed"
  PREFIX="$stage/prefix"; LIBDIR="$PREFIX/usr/lib/$MULTIARCH"
  local deb
  for deb in "$stage"/debs/*.deb; do dpkg-deb -x "$deb" "$PREFIX" || die "cannot unpack $deb"; done
  # What the build does not need: documentation, static archives, the C++/Fortran/high-level
  # HDF5 interfaces (hpcnn uses the C API only), LAPACK.
  rm -rf "$PREFIX/usr/share" "$PREFIX/usr/bin"
  find "$PREFIX" \( -name '*.a' -o -name '*fortran*' -o -name '*_cpp*' -o -name '*_hl*' -o -name 'liblapack*' \) \
    -exec rm -rf {} + 2>/dev/null
  # zlib1g-dev's libz.so points at the system's libz.so.1 by an absolute path: `node` points it at
  # the node's own libz (Python's), so drop the link here.
  find "$PREFIX" -type l -lname '/*' -delete
  find "$PREFIX" -xtype l -delete
  echo "== the run-time libraries the prefix's libraries need from the system (fallback copies)"
  mkdir -p "$stage/fallback"
  local libs; libs=$(find "$LIBDIR" -name '*.so.*' -type f)
  # The closure: repeat until no new library appears (the copies' own needs included).
  local round name path
  for round in 1 2 3 4 5 6; do
    local added=0
    while read -r name path; do
      [ -e "$stage/fallback/$name" ] && continue
      cp -L "$path" "$stage/fallback/$name" && added=1 && echo "   $name <- $path"
    done < <(outside_deps $libs $(find "$stage/fallback" -type f))
    [ "$added" = 0 ] && break
  done
  {
    echo "hpcnn GPU-node kit, gathered $(date -Is) on $(hostname) ($(. /etc/os-release 2>/dev/null; echo "${PRETTY_NAME:-unknown}"), $(ldd --version 2>&1 | head -1))"
    echo "packages:"; for deb in "$stage"/debs/*.deb; do echo "  $(dpkg-deb -f "$deb" Package Version | sed 's/^[A-Za-z]*: //' | paste -sd' ')"; done
    echo "fallback libraries (used on the node only where it lacks them):"; ls "$stage/fallback" | sed 's/^/  /'
  } > "$stage/MANIFEST.txt"
  cp "$stage/MANIFEST.txt" "$KIT/MANIFEST.txt"
  tar -C "$stage" -cJf "$ARCHIVE" prefix fallback MANIFEST.txt || die "cannot write $ARCHIVE"
  echo "== kit: $ARCHIVE ($(du -h "$ARCHIVE" | cut -f1); unpacked $(du -sh "$stage/prefix" "$stage/fallback" | cut -f1 | paste -sd+)) in $(( $(now) - t0 )) s"
  rm -rf "$stage"
}

# ------------------------------------------------------------------------------------------ node
PHASES=()
phase_done() { PHASES+=("$(printf '%-34s %5d s  %s' "$1" "$(( $(now) - $2 ))" "$3")"); }

# nvcc: PATH, CUDA_HOME, /usr/local/cuda, or the nvcc wheel (nvidia/cu13/bin) of the Python.
find_nvcc() {
  local c
  for c in "$(command -v nvcc 2>/dev/null)" "${CUDA_HOME:-/nonexistent}/bin/nvcc" /usr/local/cuda/bin/nvcc \
           $("$PY" -c 'import sys, os; [print(os.path.join(p, "nvidia", v, "bin", "nvcc")) for p in sys.path for v in ("cu13", "cu12", "cuda_nvcc")]' 2>/dev/null); do
    [ -n "$c" ] && [ -x "$c" ] && { echo "$c"; return 0; }
  done
  return 1
}

# The GPU's compute capability as CMake wants it (9.0 -> 90); "native" where nvidia-smi is silent.
gpu_arch() {
  local cc; cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
  [ -n "$cc" ] && echo "$cc" || echo native
}

# Where the build looks first for HDF5, OpenBLAS, libdeflate and zlib: the prefix, as environment
# variables CMake reads (the cache variables of the same names belong to scikit-build-core, which
# puts the Python's site-packages there for pybind11). HDF5_ROOT is Debian's folder that holds
# libhdf5.so and an include/ link: FindHDF5 then searches there only.
search_env() {
  local inc="$PREFIX/usr/include"
  printf '%s\n' "HDF5_ROOT=$LIBDIR/hdf5/serial" "CMAKE_PREFIX_PATH=$PREFIX/usr" \
    "CMAKE_LIBRARY_PATH=$LIBDIR/openblas-pthread:$LIBDIR" \
    "CMAKE_INCLUDE_PATH=$inc/$MULTIARCH/openblas-pthread:$inc"
}

# CMake settings: the prefix's libraries are written into the module's RPATH
# (CMAKE_INSTALL_RPATH_USE_LINK_PATH) as a DT_RPATH (--disable-new-dtags), which, unlike a
# RUNPATH, also serves the libraries those libraries need (libhdf5 -> libsz, libaec, and the
# fallback copies linked beside them): `import hpcnn` then works in any process, with no
# LD_LIBRARY_PATH to remember.
cmake_defines() {
  local d=(
    "CMAKE_INSTALL_RPATH_USE_LINK_PATH=ON"
    "CMAKE_MODULE_LINKER_FLAGS=-Wl,--disable-new-dtags"
  )
  if [ "$REHEARSE" = 1 ]; then
    # The system's own copies hidden, so that only the prefix can satisfy the build.
    local s=/usr/lib/$MULTIARCH
    d+=("CMAKE_IGNORE_PATH=/usr/include;/usr/include/hdf5/serial;/usr/include/$MULTIARCH;/usr/include/$MULTIARCH/openblas-pthread;$s;$s/hdf5/serial;$s/openblas-pthread;/lib/$MULTIARCH")
  fi
  printf '%s\n' "${d[@]}"
}

node_plan() {
  local nvcc arch
  nvcc=$(find_nvcc || echo "NOT FOUND")
  arch=$(gpu_arch)
  echo "kit archive:   $ARCHIVE ($( [ -f "$ARCHIVE" ] && du -h "$ARCHIVE" | cut -f1 || echo "missing: run 'gather' where the network is"))"
  echo "work folder:   $WORK (prefix, fallback, build, install)"
  echo "report folder: $OUT_DIR"
  echo "python:        $PY ($("$PY" -c 'import sys; print(sys.version.split()[0])' 2>/dev/null || echo "not found"))"
  echo "nvcc:          $nvcc"
  echo "budget:        $BUDGET s, start to report"
  if [ "$REHEARSE" = 1 ]; then
    echo "build:         rehearsal: HPCNN_CUDA=OFF HPCNN_MPI=OFF (no GPU), system HDF5/BLAS/zlib/libdeflate hidden"
  else
    echo "build:         HPCNN_CUDA=ON HPCNN_NCCL=ON HPCNN_MPI=OFF HPCNN_CUDA_ARCHS=$arch (this node's GPU only)"
  fi
  echo "steps:"
  echo "  1 unpack       tar -xJf $ARCHIVE -C $WORK"
  echo "  2 fill gaps    ldd on the prefix's libraries; a library the node lacks is linked in from fallback/"
  echo "  3 build        $(search_env | paste -sd' ') \\"
  echo "                 $PY -m pip install --no-build-isolation --no-deps --no-index --target $WORK/site -C build-dir=$WORK/build ."
  cmake_defines | sed 's/^/                   -C cmake.define./'
  echo "  4 check        ldd on the installed _core: every library resolves, HDF5 and OpenBLAS from the prefix"
  echo "  5 self-test    QUICK=1 bash slurm/gpu-selftest.sbatch (PATH and PYTHONPATH at $WORK), cut at the budget"
  echo "  6 report       $OUT_DIR/hpcnn-gpu-node-kit-<host>-<time>.txt: phases and times, build log, ldd, self-test report"
}

# Links into the prefix's library folder each library that ldd cannot resolve and fallback/ has;
# repeats for the needs of what it linked. Prints what it linked.
fill_gaps() {
  local round name
  for round in 1 2 3 4 5 6; do
    local missing
    missing=$(LD_LIBRARY_PATH="$LIBDIR:$LIBDIR/openblas-pthread:$LIBDIR/hdf5/serial" \
              ldd $(find "$LIBDIR" -name '*.so.*' \( -type f -o -type l \)) 2>/dev/null \
              | awk '$2 == "=>" && $3 == "not" {print $1}' | sort -u)
    [ -z "$missing" ] && return 0
    local linked=0
    for name in $missing; do
      if [ -e "$WORK/fallback/$name" ] && [ ! -e "$LIBDIR/$name" ]; then
        ln -s "$WORK/fallback/$name" "$LIBDIR/$name" && linked=1 && echo "from fallback: $name"
      fi
    done
    [ "$linked" = 0 ] && { echo "NOT FOUND on this node nor in the kit: $missing"; return 1; }
  done
}

node() {
  local t_start t report log
  t_start=$(now)
  mkdir -p "$OUT_DIR" || die "cannot write $OUT_DIR"
  report="$OUT_DIR/hpcnn-gpu-node-kit-$(hostname -s 2>/dev/null || echo node)-$(date +%Y%m%d-%H%M%S).txt"
  log="$WORK/log"
  [ -f "$ARCHIVE" ] || die "no kit at $ARCHIVE: run '$0 gather' where the network is, and bring $KIT along"
  command -v "$PY" >/dev/null || die "no Python '$PY' (--python)"
  # A second try in the same allocation keeps the build folder (same paths: CMake's cache stays
  # valid and the build is incremental); everything else starts afresh.
  rm -rf "$WORK/prefix" "$WORK/fallback" "$WORK/site" "$WORK/bin" "$log" && mkdir -p "$log" || die "cannot write $WORK"
  local failed=""

  t=$(now)
  { tar -C "$WORK" -xJf "$ARCHIVE" 2>&1 ||
    "$PY" -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$ARCHIVE" "$WORK"; } > "$log/unpack.txt" 2>&1 \
    || failed="unpack"
  phase_done "unpack the kit" "$t" "$(du -sh "$WORK/prefix" 2>/dev/null | cut -f1) prefix"

  t=$(now)
  if [ -z "$failed" ]; then
    # The development link to zlib: the node's own libz.so.1, the one Python has loaded.
    local libz
    libz=$("$PY" -c 'import zlib; print(next(l.split()[-1] for l in open("/proc/self/maps") if "/libz.so" in l))' 2>/dev/null \
           || ldconfig -p 2>/dev/null | awk '/libz\.so\.1 /{print $NF; exit}')
    [ -n "$libz" ] && ln -sf "$libz" "$LIBDIR/libz.so"
    { echo "libz.so -> ${libz:-NOT FOUND}"; fill_gaps; } > "$log/libs.txt" 2>&1 || failed="libraries"
  fi
  phase_done "fill library gaps (ldd)" "$t" "$(grep -c 'from fallback' "$log/libs.txt" 2>/dev/null) from fallback"

  t=$(now)
  local arch="" nvcc="" env_build=()
  if [ "$REHEARSE" = 1 ]; then
    env_build=(HPCNN_CUDA=OFF HPCNN_MPI=OFF HPCNN_NCCL=OFF)
  else
    nvcc=$(find_nvcc) || { failed="${failed:-nvcc}"; echo "no nvcc found" > "$log/build.txt"; }
    arch=$(gpu_arch)
    env_build=(HPCNN_CUDA=ON HPCNN_NCCL=ON HPCNN_MPI=OFF "HPCNN_CUDA_ARCHS=$arch" "CUDACXX=$nvcc")
  fi
  local defs=() line
  while read -r line; do defs+=(-C "cmake.define.$line"); done < <(cmake_defines)
  # Installed with --target into the work folder, not into a venv or the Python's own
  # site-packages: no venv module or ensurepip is needed, a system Python marked externally
  # managed (PEP 668) accepts it, and the node's numpy, h5py, pytest (and PyTorch's wheels) are
  # used as they are. --no-index: nothing is ever fetched.
  if [ -z "$failed" ]; then
    (cd "$HERE" && env $(search_env) "${env_build[@]}" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
      "$PY" -m pip install -v --no-build-isolation --no-deps --no-index --target "$WORK/site" \
      -C build-dir="$WORK/build" "${defs[@]}" .) > "$log/build.txt" 2>&1 || failed="build"
  fi
  phase_done "build (pip, $([ "$REHEARSE" = 1 ] && echo CPU-only || echo "CUDA sm_$arch"))" "$t" \
    "$(grep -m1 -o 'hpcnn: CUDA backend [^,]*' "$log/build.txt" 2>/dev/null)"

  # The self-test runs hpcnn as installed into $WORK/site, with the Python chosen above.
  # (a wrapper, not a link: a link to a venv's python would lose the venv.)
  mkdir -p "$WORK/bin" && printf '#!/bin/sh\nexec "%s" "$@"\n' "$(command -v "$PY")" > "$WORK/bin/python3" \
    && chmod +x "$WORK/bin/python3"
  export PATH="$WORK/bin:$WORK/site/bin:$PATH" PYTHONPATH="$WORK/site${PYTHONPATH:+:$PYTHONPATH}"

  t=$(now)
  local core
  core=$(ls "$WORK"/site/hpcnn/_core*.so 2>/dev/null | head -1)
  {
    echo "module: ${core:-NOT BUILT}"
    if [ -n "$core" ]; then
      readelf -d "$core" | grep -E 'RPATH|RUNPATH'
      ldd "$core"
      ldd "$core" | grep -q "not found" && echo "CHECK FAILED: a library is not found"
      ldd "$core" | grep -E 'libhdf5|libopenblas' | grep -v " $PREFIX/" && echo "CHECK FAILED: HDF5 or OpenBLAS from outside the prefix"
      # The prefix's libraries at work: an HDF5 file written (gzip through libdeflate) and read back
      # by hpcnn's loader, and a CPU training epoch (OpenBLAS).
      (cd / && python3 - <<'PY'
import json, os, tempfile
import numpy as np
import hpcnn
from hpcnn.data import HDF5Dataset, write_hdf5
from hpcnn.layers import Dense, Flatten, InputLayer
print(json.dumps(hpcnn.build_info(), default=str))
r = np.random.default_rng(0)
with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "smoke.h5")
    write_hdf5(path, {"x": r.integers(0, 256, (64, 8, 8, 1), dtype=np.uint8),
                      "y": r.integers(0, 4, 64).astype(np.int32)}, chunk_rows=16)
    m = hpcnn.Sequential([InputLayer(input_shape=[8, 8, 1]), Flatten(), Dense(4, activation="softmax")])
    m.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    h = m.fit(HDF5Dataset(path, x="x", y="y", batch_size=16), epochs=1, verbose=0)
    print("HDF5 written and read back, one CPU training epoch: loss", round(float(h.history["loss"][0]), 4))
PY
      ) || echo "CHECK FAILED: import hpcnn, HDF5 round trip or CPU epoch"
    fi
  } > "$log/check.txt" 2>&1
  if [ -z "$core" ] || grep -q "CHECK FAILED\|Traceback" "$log/check.txt"; then failed="${failed:-check}"; fi
  phase_done "check the module (ldd, HDF5, BLAS)" "$t" ""

  t=$(now)
  local left=$(( BUDGET - (t - t_start) - 15 )) st_rc=""
  local st_report="$HERE/hpcnn-gpu-selftest-${SLURM_JOB_ID:-local}.txt"
  if [ -z "$failed" ] && [ "$left" -gt 30 ]; then
    rm -f "$st_report"
    # SLURM_SUBMIT_DIR: the self-test runs from this source folder wherever srun was called.
    (cd "$HERE" && SLURM_SUBMIT_DIR="$HERE" QUICK="${QUICK:-1}" timeout --kill-after=10 "$left" \
      bash slurm/gpu-selftest.sbatch) > "$log/selftest.txt" 2>&1
    st_rc=$?
    [ "$st_rc" = 124 ] || [ "$st_rc" = 137 ] && st_rc="$st_rc (cut at the budget, $left s)"
    [ "$st_rc" = 0 ] || failed="${failed:-self-test}"
  else
    st_rc="not run (${failed:+$failed failed}${failed:-$left s left of the budget})"
  fi
  phase_done "self-test (QUICK=${QUICK:-1})" "$t" "exit $st_rc"

  t=$(now)
  {
    echo "hpcnn GPU-node kit report: $(date -Is) on $(hostname) $([ "$REHEARSE" = 1 ] && echo "(REHEARSAL: CPU-only build, no GPU)")"
    echo "result: $([ -z "$failed" ] && echo "PASSED" || echo "FAILED at: $failed")"
    echo "source: $(cd "$HERE" && git rev-parse --short HEAD 2>/dev/null || echo "?")  python: $("$PY" -c 'import sys; print(sys.version.split()[0])')  nvcc: ${nvcc:-none}  arch: ${arch:-none}  cores: $(nproc)"
    echo "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>/dev/null | head -1 || echo none)"
    echo; echo "===== phases (budget $BUDGET s) ====="
    printf '%s\n' "${PHASES[@]}"
    printf '%-34s %5d s\n' "report" "$(( $(now) - t ))"
    printf '%-34s %5d s\n' "total" "$(( $(now) - t_start ))"
    echo; echo "===== build log (pip -v) ====="; cat "$log/build.txt" 2>/dev/null
    echo; echo "===== kit: unpack, libraries ====="; cat "$log/unpack.txt" "$log/libs.txt" "$WORK/MANIFEST.txt" 2>/dev/null
    echo; echo "===== module check ====="; cat "$log/check.txt"
    echo; echo "===== self-test output ====="; cat "$log/selftest.txt" 2>/dev/null
    echo; echo "===== self-test report (slurm/gpu-selftest.sbatch) ====="
    cat "$st_report" 2>/dev/null || echo "(none written)"
  } > "$report"
  sed -n '1,/^$/p;/^===== phases/,/^total/p' "$report"
  echo "report: $report"
  [ -z "$failed" ]
}

case "$CMD" in
  gather) gather ;;
  node) node ;;
  plan) node_plan ;;
  libs) fill_gaps ;;
  -h|--help|help) usage ;;
  "") usage; exit 2 ;;
  *) die "unknown command '$CMD' (gather, node, plan, libs; see --help)" ;;
esac
