# tools/gpu-node-kit.sh's Python half, sourced by it (not run alone): on the node, before the
# build, Python.h, CMake >= 3.24, pip and a C++ compiler are checked, and the kit's wheels that
# this Python lacks are installed into the work folder (docs/gpu.md, "A GPU node without
# network"). Uses the main script's PY, WHEELS, WORK and CMAKE_MIN.

# The kit's wheel folder for the node's Python (wheels/cp312 for 3.12).
py_wheels_dir() {
  echo "$WHEELS/$("$PY" -c 'import sys; print("cp%d%d" % sys.version_info[:2])' 2>/dev/null || echo unknown)"
}

# Python.h, CMake >= CMAKE_MIN, pip and a C++ compiler: one line per check; the missing ones are
# named in one line "MISSING: ...", and the return code is 1.
check_prerequisites() {
  local missing=() inc cm v
  inc=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null)
  if [ -n "$inc" ] && [ -f "$inc/Python.h" ]; then
    echo "Python.h: $inc/Python.h"
  else
    missing+=("Python.h for $PY (not in '${inc:-?}': install the Python development headers, e.g. python3-dev, or use a conda or pyenv Python, which has them)")
  fi
  for cm in "$(command -v cmake 2>/dev/null)" \
            "$("$PY" -c 'import cmake, os; print(os.path.join(cmake.CMAKE_BIN_DIR, "cmake"))' 2>/dev/null)"; do
    [ -n "$cm" ] && [ -x "$cm" ] || continue
    v=$("$cm" --version 2>/dev/null | awk 'NR == 1 {print $3}')
    [ -n "$v" ] && printf '%s\n%s\n' "$CMAKE_MIN" "$v" | sort -V -C && break
    echo "cmake: $cm is $v, older than $CMAKE_MIN"
    cm=""
  done
  if [ -n "$cm" ]; then
    echo "cmake: $cm ($v)"
  else
    missing+=("CMake >= $CMAKE_MIN (found: ${v:-none}; on PATH, or the cmake wheel's: put a newer one first on PATH, e.g. module load cmake)")
  fi
  if "$PY" -m pip --version >/dev/null 2>&1; then echo "pip: $("$PY" -m pip --version | cut -d' ' -f1-2)"; else missing+=("pip for $PY"); fi
  if command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1; then
    echo "C++ compiler: $(command -v c++ || command -v g++)"
  else
    missing+=("a C++ compiler (c++ or g++ on PATH)")
  fi
  [ "${#missing[@]}" -eq 0 ] && return 0
  local IFS=';'
  echo "MISSING: ${missing[*]}"
  return 1
}

# The kit's wheels this Python lacks: every wheel of its folder whose distribution is not installed
# at all, and the two build requirements with floors when older. Prints the distribution names
# (with the floor where there is one); says why on stderr. A distribution the node has (numpy,
# PyTorch's packaging ...) is never shadowed by the kit's copy.
missing_python_packages() {
  "$PY" - "$1" <<'PY'
import importlib.metadata as md
import pathlib
import re
import sys

FLOORS = {"scikit_build_core": (0, 8), "pybind11": (2, 12)}


def norm(name):
    return re.sub(r"[-_.]+", "_", name).lower()


def numbers(version):
    out = []
    for part in version.split("."):
        m = re.match(r"\d+", part)
        if not m:
            break
        out.append(int(m.group()))
    return tuple(out)


installed = {}
for dist in md.distributions():
    if dist.metadata["Name"]:
        installed.setdefault(norm(dist.metadata["Name"]), dist.version)
for wheel in sorted(pathlib.Path(sys.argv[1]).glob("*.whl")):
    name = norm(wheel.name.split("-")[0])
    have, floor = installed.get(name), FLOORS.get(name)
    spec = name + (">=" + ".".join(map(str, floor)) if floor else "")
    if have is None:
        print(f"missing: {name}", file=sys.stderr)
        print(spec)
    elif floor and numbers(have) < floor:
        print(f"too old: {name} {have}, the build needs {spec}", file=sys.stderr)
        print(spec)
    else:
        print(f"present: {name} {have}", file=sys.stderr)
PY
}

# Installs into $WORK/pydeps, from the kit's wheels only, what this Python lacks; then imports
# every package the build and the tests need.
install_python_packages() {
  local dir; dir=$(py_wheels_dir)
  local wanted
  if [ ! -d "$dir" ]; then
    echo "no wheels for this Python in the kit ($dir): gather with --pythons $("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
  else
    wanted=$(missing_python_packages "$dir" 2>&1 >/dev/null; true)
    echo "$wanted"
    mapfile -t wanted < <(missing_python_packages "$dir" 2>/dev/null)
    if [ "${#wanted[@]}" -gt 0 ]; then
      echo "installing ${#wanted[@]}: ${wanted[*]}"
      # Only the kit's folder: no pip configuration of the machine (an index, other find-links).
      env -u PIP_FIND_LINKS -u PIP_INDEX_URL -u PIP_EXTRA_INDEX_URL PIP_CONFIG_FILE=/dev/null \
      "$PY" -m pip install --disable-pip-version-check --no-index --find-links "$dir" --no-deps \
        --target "$WORK/pydeps" "${wanted[@]}" || { echo "PIP FAILED"; return 1; }
    else
      echo "nothing to install: this Python has them all"
    fi
  fi
  PYTHONPATH="$WORK/pydeps${PYTHONPATH:+:$PYTHONPATH}" "$PY" - <<'PY'
import importlib.metadata as md
missing = []
for module, dist in (("scikit_build_core", "scikit-build-core"), ("pybind11", "pybind11"), ("numpy", "numpy"),
                     ("h5py", "h5py"), ("pytest", "pytest")):
    try:
        __import__(module)
        print(f"import {module}: {md.version(dist)}")
    except Exception as e:  # noqa: BLE001 -- any failure to import is reported by name
        missing.append(f"{module} ({type(e).__name__}: {e})")
v = tuple(int(x) for x in md.version("pybind11").split(".")[:2]) if "pybind11" not in str(missing) else (0, 0)
if v < (2, 12):
    missing.append(f"pybind11>=2.12 (found {'.'.join(map(str, v))})")
if missing:
    print("MISSING: " + "; ".join(missing))
    raise SystemExit(1)
PY
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

