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
#                                  libraries (libgfortran, libcurl, ...), packed into ONE
#                                  archive in the kit folder (default gpu-node-kit/, ignored by
#                                  git; about 13 MB), and the Python packages the build and the
#                                  tests need as wheels for CPython 3.10-3.13 (manylinux x86_64,
#                                  `pip download`): scikit-build-core, pybind11>=2.12, numpy,
#                                  h5py, pytest and what they need, in wheels/cp3XX/ (about 23 MB
#                                  per Python version: --pythons 3.12 takes only the node's)
#   tools/gpu-node-kit.sh node     on the GPU node, from this source folder with the kit folder
#                                  beside it: check Python.h and CMake >= 3.24 (naming what is
#                                  missing), install from the kit's wheels only the Python
#                                  packages the node lacks (pip --no-index, into the work folder),
#                                  unpack, build for this node's GPU only
#                                  (pip --no-build-isolation, CUDA on, NCCL from the wheel, MPI
#                                  off), run slurm/gpu-selftest.sbatch (QUICK=1) and write ONE
#                                  report with the timings of each phase at its top (the build
#                                  log last), rewritten as each phase ends and completed when the run is
#                                  killed (SIGTERM, SIGINT); the whole run stays within a time
#                                  budget (default 540 s, 9 minutes) so that a second try fits a
#                                  15-minute allocation, the build within its own limit
#   tools/gpu-node-kit.sh plan     what `node` would do here, without doing it
#   tools/gpu-node-kit.sh check    `node`'s first checks alone: Python.h, CMake, pip, a C++
#                                  compiler, and which of the kit's wheels this Python lacks
#   tools/gpu-node-kit.sh python   `node`'s Python phase alone: those wheels into <work>/pydeps
#   tools/gpu-node-kit.sh libs     `node`'s library phase alone, on a work folder it unpacked
#
# Options: --kit DIR (the kit folder), --work DIR (where `node` unpacks and builds; default
# ${TMPDIR:-/tmp}/hpcnn-gpu-node, never inside the kit, which must stay small for the copy to
# the node), --out DIR (where the report goes; default $OUT, else the current folder),
# --python PY (the node's Python; default python3), --budget SECONDS (default 540; a second
# `node` run keeps the work folder's build and only recompiles what changed), --build-limit
# SECONDS (the build's own limit; default the budget less 150 s, left for the checks and the
# smoke tests), --pythons "3.10 3.11 3.12 3.13" (gather: the Python versions whose wheels are
# fetched; a copy to the node that must stay small takes only the node's, e.g. --pythons 3.12),
# --rehearse (`node` without a GPU: a CPU-only build from the prefix alone, with the system's
# own HDF5, OpenBLAS, libdeflate and zlib hidden from CMake, its libgfortran hidden from the
# linker and the loader (a mount namespace: needs root and `unshare`), the Python packages
# hidden by a fresh venv without the system's site-packages, then the same checks and
# self-test, whose GPU sections skip; how the kit is tested where there is no GPU,
# bench/RESULTS.md).
set -uo pipefail

HERE="$(cd "$(dirname "$0")/.." && pwd)"
KIT="$HERE/gpu-node-kit"
WORK="${TMPDIR:-/tmp}/hpcnn-gpu-node"
OUT_DIR="${OUT:-$PWD}"
PY="python3"
BUDGET=540
BUILD_LIMIT=""
PYTHONS="3.10 3.11 3.12 3.13"
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
# The Python packages the build (pyproject.toml's build requirements, for pip's
# --no-build-isolation) and the self-test need; `gather` fetches them and what they need as wheels.
PY_REQS=("scikit-build-core>=0.8" "pybind11>=2.12" "numpy" "h5py" "pytest")
CMAKE_MIN="3.24"   # CMakeLists.txt's cmake_minimum_required
SYSTEM_LIBS='^(libc|libm|libdl|libpthread|librt|libresolv|libutil|ld-linux-x86-64|linux-vdso|libgcc_s|libstdc\+\+)\.so'

usage() { awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; }
die() { echo "gpu-node-kit: $*" >&2; exit 2; }
now() { date +%s; }

CMD="${1:-}"
[ $# -gt 0 ] && shift
ARGS=("$@")   # for the rehearsal's re-run inside a mount namespace
while [ $# -gt 0 ]; do
  case "$1" in
    --kit) KIT="$2"; shift 2 ;;
    --work) WORK="$2"; shift 2 ;;
    --out) OUT_DIR="$2"; shift 2 ;;
    --python) PY="$2"; shift 2 ;;
    --budget) BUDGET="$2"; shift 2 ;;
    --build-limit) BUILD_LIMIT="$2"; shift 2 ;;
    --pythons) PYTHONS="${2//,/ }"; shift 2 ;;
    --rehearse) REHEARSE=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
case "$BUDGET" in ''|*[!0-9]*) die "--budget wants whole seconds, not '$BUDGET'" ;; esac
[ -z "$BUILD_LIMIT" ] && BUILD_LIMIT=$(( BUDGET > 300 ? BUDGET - 150 : BUDGET / 2 ))
case "$BUILD_LIMIT" in *[!0-9]*) die "--build-limit wants whole seconds, not '$BUILD_LIMIT'" ;; esac
for v in $PYTHONS; do
  [[ "$v" =~ ^3\.[0-9]+$ ]] || die "--pythons wants versions such as '3.12' or '3.11 3.12', not '$v'"
done
ARCHIVE="$KIT/$ARCHIVE_NAME"
WHEELS="$KIT/wheels"
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
  echo "== archive: $ARCHIVE ($(du -h "$ARCHIVE" | cut -f1); unpacked $(du -sh "$stage/prefix" "$stage/fallback" | cut -f1 | paste -sd+)) in $(( $(now) - t0 )) s"
  rm -rf "$stage"
  gather_wheels
  echo "== kit: $KIT, $(du -sh "$KIT" | cut -f1) in all ($(du -sh "$WHEELS" | cut -f1) of wheels for Python $PYTHONS), $(( $(now) - t0 )) s"
}

# The Python packages as wheels, one folder per CPython version (wheels/cp312/ ...), each holding
# exactly what pip resolves for that version (tomli and exceptiongroup only for 3.10, ...).
gather_wheels() {
  "$PY" -m pip --version >/dev/null 2>&1 || die "gather needs pip for '$PY' (--python) to download the wheels"
  rm -rf "$WHEELS"
  local v tag dir
  for v in $PYTHONS; do
    tag="cp${v/./}"
    dir="$WHEELS/$tag"
    mkdir -p "$dir" || die "cannot write $dir"
    echo "== wheels for CPython $v (pip download, manylinux x86_64): ${PY_REQS[*]} and what they need"
    # pip evaluates the requirements' markers (`tomli; python_version < "3.11"`) for the Python
    # it runs in, not for --python-version: what pytest and scikit-build-core need only before 3.11
    # is named here.
    local extra=()
    [ "$v" = 3.10 ] && extra=(tomli exceptiongroup typing-extensions)
    "$PY" -m pip download -q --disable-pip-version-check --only-binary=:all: \
      --python-version "$v" --implementation cp --abi "$tag" \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
      -d "$dir" "${PY_REQS[@]}" "${extra[@]}" || die "pip download for CPython $v failed"
    ls "$dir" | sed 's/^/   /'
  done
}

# ------------------------------------------------------------------------------------------ node
PHASES=()
NVCC=""; ARCH=""

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
# LD_LIBRARY_PATH to remember. -rpath-link: GNU ld looks for a shared library's own needs
# (OpenBLAS' libgfortran.so.5, libhdf5's libsz and libcurl) in the -rpath-link folders, never in
# the -L ones; without it, where the node lacks libgfortran, FindBLAS' test program does not link
# against the prefix's OpenBLAS and the build stops at "BLAS not found" although the fallback copy
# is linked into the prefix. The executables' flags reach that test program (try_compile).
cmake_defines() {
  local link="-Wl,-rpath-link,$LIBDIR:$LIBDIR/openblas-pthread:$LIBDIR/hdf5/serial"
  local d=(
    "CMAKE_INSTALL_RPATH_USE_LINK_PATH=ON"
    "CMAKE_EXE_LINKER_FLAGS=$link"
    "CMAKE_SHARED_LINKER_FLAGS=$link"
    "CMAKE_MODULE_LINKER_FLAGS=-Wl,--disable-new-dtags $link"
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
    echo "hidden:        libgfortran hidden from the linker and the loader (a mount namespace: $( [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null && echo "possible here" || echo "NOT possible here: needs root and unshare -m")); the Python packages, by a fresh venv of $PY"
  else
    echo "build:         HPCNN_CUDA=ON HPCNN_NCCL=ON HPCNN_MPI=OFF HPCNN_CUDA_ARCHS=$arch (this node's GPU only)"
  fi
  echo "wheels:        $(py_wheels_dir) ($( [ -d "$(py_wheels_dir)" ] && ls "$(py_wheels_dir)" | wc -l || echo "missing: gather --pythons <this Python's version>") files)"
  echo "steps:"
  echo "  1 prerequisites Python.h of $PY, CMake >= $CMAKE_MIN, pip, a C++ compiler: what is missing is named"
  echo "  2 python        $PY -m pip install --no-index --find-links $(py_wheels_dir) --no-deps --target $WORK/pydeps <only what this Python lacks of: ${PY_REQS[*]} and their needs>"
  echo "  3 unpack        tar -xJf $ARCHIVE -C $WORK"
  echo "  4 fill gaps     ldd on the prefix's libraries; a library the node lacks is linked in from fallback/"
  echo "  5 build         $(search_env | paste -sd' ') \\"
  echo "                  timeout $BUILD_LIMIT $PY -m pip install --no-build-isolation --no-deps --no-index --target $WORK/site -C build-dir=$WORK/build ."
  cmake_defines | sed 's/^/                    -C cmake.define./'
  echo "  6 check         ldd on the installed _core: every library resolves, HDF5 and OpenBLAS from the prefix"
  echo "  7 self-test     QUICK=1 bash slurm/gpu-selftest.sbatch (PATH and PYTHONPATH at $WORK), cut at the budget"
  echo "  8 report        $OUT_DIR/hpcnn-gpu-node-kit-<host>-<time>.txt, rewritten as each phase ends, completed on SIGTERM/SIGINT"
}

# --------------------------------------------------------------------- node: Python and CMake
# py_wheels_dir, check_prerequisites, missing_python_packages, install_python_packages
# shellcheck source=tools/gpu-node-kit-python.sh
. "$HERE/tools/gpu-node-kit-python.sh" || die "cannot read $HERE/tools/gpu-node-kit-python.sh"

# ------------------------------------------------------------------------------- node: the run
# The rehearsal runs in a mount namespace of its own where the system's libgfortran is hidden (an
# overlay with whiteouts over the library folder: the linker and the loader then find no
# libgfortran.so.5 but the kit's fallback copy), as on a node without it. Needs root and unshare.
hide_system_libgfortran() {
  local d="/usr/lib/$MULTIARCH" f
  local files=("$d"/libgfortran.so*)
  [ -e "${files[0]}" ] || { echo "libgfortran: none on this machine, nothing to hide"; return 0; }
  rm -rf "$WORK/hide" && mkdir -p "$WORK/hide/upper" "$WORK/hide/work" || return 1
  for f in "${files[@]}"; do mknod "$WORK/hide/upper/$(basename "$f")" c 0 0 || return 1; done
  mount -t overlay hpcnn-kit-hide -o "lowerdir=$d,upperdir=$WORK/hide/upper,workdir=$WORK/hide/work" "$d" || return 1
  ls "$d"/libgfortran.so* >/dev/null 2>&1 && return 1
  echo "libgfortran: the system's copies hidden in this mount namespace: ${files[*]}"
}

REPORT=""; LOG=""; T_START=0; FAILED=""; CURRENT=""; T_PHASE=0; CHILD=""; NOTES=()
phase_start() { CURRENT="$1"; T_PHASE=$(now); write_report; }
phase_end() {
  PHASES+=("$(printf '%-38s %5d s  %s' "$CURRENT" "$(( $(now) - T_PHASE ))" "$1")")
  CURRENT=""
  write_report
}

# A long step (the build, the self-test) as a background job in its own process group, so that a
# signal interrupts the wait at once and reaches everything the step started.
run_job() {
  "$@" &
  CHILD=$!
  wait "$CHILD"
  local rc=$?
  CHILD=""
  return "$rc"
}

# The report, written whole after each phase (to a temporary file, then renamed: a reader never
# sees half of it) and once more when the run is killed.
write_report() {
  local st_report="$HERE/hpcnn-gpu-selftest-${SLURM_JOB_ID:-local}.txt"
  {
    echo "hpcnn GPU-node kit report: $(date -Is) on $(hostname) $([ "$REHEARSE" = 1 ] && echo "(REHEARSAL: CPU-only build, no GPU)")"
    if [ -n "$CURRENT" ]; then echo "result: RUNNING (now: $CURRENT)${FAILED:+, FAILED at: $FAILED}"
    else echo "result: $([ -z "$FAILED" ] && echo "PASSED" || echo "FAILED at: $FAILED")"; fi
    echo "source: $(cd "$HERE" && git rev-parse --short HEAD 2>/dev/null || echo "?")  python: $PY ($("$PY" -c 'import sys; print(sys.version.split()[0])' 2>/dev/null))  nvcc: ${NVCC:-none}  arch: ${ARCH:-none}  cores: $(nproc)"
    echo "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>/dev/null | head -1 || echo none)"
    [ "${#NOTES[@]}" -gt 0 ] && printf 'note: %s\n' "${NOTES[@]}"
    echo; echo "===== phases (budget $BUDGET s, build limit $BUILD_LIMIT s) ====="
    [ "${#PHASES[@]}" -gt 0 ] && printf '%s\n' "${PHASES[@]}"
    printf '%-38s %5d s\n' "total" "$(( $(now) - T_START ))"
    echo; echo "===== prerequisites, Python packages ====="; cat "$LOG/prereq.txt" "$LOG/python.txt" 2>/dev/null
    echo; echo "===== kit: unpack, libraries ====="; cat "$LOG/unpack.txt" "$LOG/libs.txt" "$WORK/MANIFEST.txt" 2>/dev/null
    echo; echo "===== module check ====="; cat "$LOG/check.txt" 2>/dev/null
    echo; echo "===== self-test output ====="; cat "$LOG/selftest.txt" 2>/dev/null
    echo; echo "===== self-test report (slurm/gpu-selftest.sbatch) ====="
    cat "$st_report" 2>/dev/null || echo "(none written)"
    echo; echo "===== build log (pip -v) ====="; cat "$LOG/build.txt" 2>/dev/null
  } > "$REPORT.part" 2>&1
  mv -f "$REPORT.part" "$REPORT"
}

on_signal() {
  local sig="$1" i
  # A second signal (Slurm signals every process of the step) must not cut this short.
  trap "" TERM INT
  if [ -n "$CHILD" ]; then
    # The self-test completes its own report on SIGTERM; the build just stops.
    kill -TERM -- "-$CHILD" 2>/dev/null || kill -TERM "$CHILD" 2>/dev/null
    for i in $(seq 30); do kill -0 "$CHILD" 2>/dev/null || break; sleep 0.5; done
    kill -KILL -- "-$CHILD" 2>/dev/null
  fi
  FAILED="${FAILED:-interrupted}"
  [ -n "$CURRENT" ] && phase_end "INTERRUPTED by SIG$sig" || write_report
  # (fd 5: the terminal; fd 2 may be a step's log, redirected around the wait the signal cut short)
  echo "gpu-node-kit: SIG$sig after $(( $(now) - T_START )) s; report (what ran): $REPORT" >&5
  exit $(( 128 + $(kill -l "$sig") ))
}

node() {
  # The rehearsal re-runs itself in a mount namespace of its own, to hide the system's libgfortran.
  if [ "$REHEARSE" = 1 ] && [ -z "${HPCNN_KIT_NAMESPACE:-}" ]; then
    if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
      exec env HPCNN_KIT_NAMESPACE=1 unshare -m bash "$0" node "${ARGS[@]}"
    fi
    NOTES+=("the system's libgfortran is NOT hidden (hiding it needs root and 'unshare -m')")
  fi
  T_START=$(now)
  mkdir -p "$OUT_DIR" || die "cannot write $OUT_DIR"
  REPORT="$OUT_DIR/hpcnn-gpu-node-kit-$(hostname -s 2>/dev/null || echo node)-$(date +%Y%m%d-%H%M%S).txt"
  LOG="$WORK/log"
  [ -f "$ARCHIVE" ] || die "no kit at $ARCHIVE: run '$0 gather' where the network is, and bring $KIT along"
  command -v "$PY" >/dev/null || die "no Python '$PY' (--python)"
  # A second try in the same allocation keeps the build folder (same paths: CMake's cache stays
  # valid and the build is incremental); everything else starts afresh.
  rm -rf "$WORK/prefix" "$WORK/fallback" "$WORK/site" "$WORK/pydeps" "$WORK/bin" "$LOG" && mkdir -p "$LOG" \
    || die "cannot write $WORK"
  set -m
  exec 5>&2
  trap 'on_signal TERM' TERM
  trap 'on_signal INT' INT

  if [ "$REHEARSE" = 1 ]; then
    phase_start "rehearsal: hide system libraries"
    local hidden=""
    if [ -n "${HPCNN_KIT_NAMESPACE:-}" ]; then
      hidden=$(hide_system_libgfortran 2>&1) || NOTES+=("the system's libgfortran is NOT hidden: $hidden")
    fi
    # The node's Python packages hidden too: a fresh venv without the system's site-packages.
    if "$PY" -m venv --clear "$WORK/bare-venv" > "$LOG/venv.txt" 2>&1; then
      PY="$WORK/bare-venv/bin/python"
    else
      NOTES+=("no fresh venv ($(tail -1 "$LOG/venv.txt")): the Python packages of $PY are not hidden")
    fi
    phase_end "${hidden:-libgfortran not hidden}; Python: $PY"
  fi

  phase_start "prerequisites (Python.h, CMake)"
  check_prerequisites > "$LOG/prereq.txt" 2>&1 || FAILED="prerequisites"
  phase_end "$(grep -m1 '^MISSING' "$LOG/prereq.txt" || echo "all there")"

  phase_start "Python packages (kit wheels)"
  if [ -z "$FAILED" ]; then
    install_python_packages > "$LOG/python.txt" 2>&1 || FAILED="Python packages"
  fi
  phase_end "$(grep -c '^missing\|^too old' "$LOG/python.txt" 2>/dev/null) installed from the kit$(grep -m1 '^MISSING' "$LOG/python.txt" | sed 's/^/; /')"
  export PYTHONPATH="$WORK/site:$WORK/pydeps${PYTHONPATH:+:$PYTHONPATH}"

  phase_start "unpack the kit"
  if [ -z "$FAILED" ]; then
    { tar -C "$WORK" -xJf "$ARCHIVE" 2>&1 ||
      "$PY" -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$ARCHIVE" "$WORK"; } > "$LOG/unpack.txt" 2>&1 \
      || FAILED="unpack"
  fi
  phase_end "$(du -sh "$WORK/prefix" 2>/dev/null | cut -f1) prefix"

  phase_start "fill library gaps (ldd)"
  if [ -z "$FAILED" ]; then
    # The development link to zlib: the node's own libz.so.1, the one Python has loaded.
    local libz
    libz=$("$PY" -c 'import zlib; print(next(l.split()[-1] for l in open("/proc/self/maps") if "/libz.so" in l))' 2>/dev/null \
           || ldconfig -p 2>/dev/null | awk '/libz\.so\.1 /{print $NF; exit}')
    [ -n "$libz" ] && ln -sf "$libz" "$LIBDIR/libz.so"
    { echo "libz.so -> ${libz:-NOT FOUND}"; fill_gaps; } > "$LOG/libs.txt" 2>&1 || FAILED="libraries"
  fi
  phase_end "$(grep 'from fallback' "$LOG/libs.txt" 2>/dev/null | sed 's/from fallback: //' | paste -sd' ' | sed 's/^./from the fallback: &/')"

  phase_start "build (pip, $([ "$REHEARSE" = 1 ] && echo CPU-only || echo "CUDA"))"
  local env_build=()
  if [ "$REHEARSE" = 1 ]; then
    env_build=(HPCNN_CUDA=OFF HPCNN_MPI=OFF HPCNN_NCCL=OFF)
  else
    NVCC=$(find_nvcc) || { FAILED="${FAILED:-nvcc}"; echo "no nvcc found" > "$LOG/build.txt"; }
    ARCH=$(gpu_arch)
    env_build=(HPCNN_CUDA=ON HPCNN_NCCL=ON HPCNN_MPI=OFF "HPCNN_CUDA_ARCHS=$ARCH" "CUDACXX=$NVCC")
  fi
  local defs=() line build_rc=""
  while read -r line; do defs+=(-C "cmake.define.$line"); done < <(cmake_defines)
  # Installed with --target into the work folder, not into a venv or the Python's own
  # site-packages: no venv module or ensurepip is needed, a system Python marked externally
  # managed (PEP 668) accepts it, and the node's numpy, h5py, pytest (and PyTorch's wheels) are
  # used as they are. --no-index: nothing is ever fetched. Under its own time limit, so that the
  # smoke tests still get their minutes.
  if [ -z "$FAILED" ]; then
    # (no subshell: the job must be this shell's, for on_signal)
    cd "$HERE" || die "cannot enter $HERE"
    run_job timeout --kill-after=10 "$BUILD_LIMIT" env $(search_env) "${env_build[@]}" \
      CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
      "$PY" -m pip install -v --no-build-isolation --no-deps --no-index --target "$WORK/site" \
      -C build-dir="$WORK/build" "${defs[@]}" . > "$LOG/build.txt" 2>&1
    build_rc=$?
    case "$build_rc" in
      0) ;;
      124|137) FAILED="build (cut at its limit, $BUILD_LIMIT s: run again, the build folder is kept)" ;;
      *) FAILED="build" ;;
    esac
  fi
  phase_end "$(grep -m1 -o 'hpcnn: CUDA backend [^,]*' "$LOG/build.txt" 2>/dev/null)${build_rc:+ exit $build_rc}"

  # The self-test runs hpcnn as installed into $WORK/site, with the Python chosen above.
  # (a wrapper, not a link: a link to a venv's python would lose the venv.)
  mkdir -p "$WORK/bin" && printf '#!/bin/sh\nexec "%s" "$@"\n' "$(command -v "$PY")" > "$WORK/bin/python3" \
    && chmod +x "$WORK/bin/python3"
  export PATH="$WORK/bin:$WORK/site/bin:$WORK/pydeps/bin:$PATH"

  phase_start "check the module (ldd, HDF5, BLAS)"
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
  } > "$LOG/check.txt" 2>&1
  if [ -z "$core" ] || grep -q "CHECK FAILED\|Traceback" "$LOG/check.txt"; then FAILED="${FAILED:-check}"; fi
  phase_end "$(grep -m1 -o 'libgfortran.so.5 => [^ ]*' "$LOG/check.txt")"

  phase_start "self-test (QUICK=${QUICK:-1})"
  local left=$(( BUDGET - ($(now) - T_START) - 15 )) st_rc=""
  local st_report="$HERE/hpcnn-gpu-selftest-${SLURM_JOB_ID:-local}.txt"
  if [ -z "$FAILED" ] && [ "$left" -gt 30 ]; then
    rm -f "$st_report"
    # SLURM_SUBMIT_DIR: the self-test runs from this source folder wherever srun was called.
    # timeout sends SIGTERM at the budget: the self-test then completes its own report.
    cd "$HERE" || die "cannot enter $HERE"
    run_job env SLURM_SUBMIT_DIR="$HERE" QUICK="${QUICK:-1}" timeout --kill-after=20 "$left" \
      bash slurm/gpu-selftest.sbatch > "$LOG/selftest.txt" 2>&1
    st_rc=$?
    [ "$st_rc" = 124 ] || [ "$st_rc" = 137 ] && st_rc="$st_rc (cut at the budget, $left s)"
    [ "$st_rc" = 0 ] || FAILED="${FAILED:-self-test}"
  else
    if [ -n "$FAILED" ]; then st_rc="not run ($FAILED failed)"; else st_rc="not run ($left s left of the budget)"; fi
  fi
  phase_end "exit $st_rc"

  trap - TERM INT
  sed -n '1,/^$/p;/^===== phases/,/^total/p' "$REPORT"
  echo "report: $REPORT"
  [ -z "$FAILED" ]
}

case "$CMD" in
  gather) gather ;;
  node) node ;;
  plan) node_plan ;;
  libs) fill_gaps ;;
  check) check_prerequisites; rc=$?; echo "wheels: $(py_wheels_dir)"
         [ -d "$(py_wheels_dir)" ] && { missing_python_packages "$(py_wheels_dir)" >/dev/null; }; exit $rc ;;
  python) mkdir -p "$WORK" && install_python_packages ;;
  -h|--help|help) usage ;;
  "") usage; exit 2 ;;
  *) die "unknown command '$CMD' (gather, node, plan, check, python, libs; see --help)" ;;
esac; exit $?   # on this line: bash reads a script as it runs, and a kit edited meanwhile must not run on
