"""CMake finds cuDNN, cuBLAS, NCCL and the CUDA runtime in NVIDIA's pip wheels (issue 22).

A GPU node without network may have them only as the wheels PyTorch installed:
`site-packages/nvidia/{cudnn,nccl,cu13}/{include,lib}` with versioned `lib*.so.N` files and no
unversioned link (cmake/nvidia_wheels.cmake). Here such a layout is made from the CUDA toolkit
of this machine (links to its headers and to its versioned libraries only), the toolkit's own
library and header folders are hidden from CMake, and a configure-only run of the real
CMakeLists.txt must take every CUDA library from the wheels, find them through the Python's
sys.path, and put their folders into the module's RPATH. A second, smaller project checks the
order: where a toolkit has the library too, the toolkit's wins. Nothing is compiled; no GPU."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support import paths

ROOT = paths.ROOT
CUDA = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
NVCC = CUDA / "bin" / "nvcc"

# (wheel folder, header globs, versioned library files) as NVIDIA's CUDA 13 wheels lay them out
# (their RECORD files: nvidia-cudnn-cu13, nvidia-nccl-cu13, nvidia-cublas, nvidia-cuda-runtime).
WHEELS = [
    ("cudnn", ["cudnn*.h"], ["libcudnn*.so.9"]),
    ("nccl", ["nccl.h"], ["libnccl.so.2"]),
    ("cu13", ["cublas*.h"], ["libcublas.so.13", "libcublasLt.so.13", "libcudart.so.13", "libcudart_static.a"]),
]


def cmake():
    exe = shutil.which("cmake")
    if not exe:
        pytest.skip("cmake is not installed")
    return exe


def toolkit_lib():
    for d in ("lib64", "lib", "targets/x86_64-linux/lib"):
        if (CUDA / d / "libcudnn.so.9").exists() and (CUDA / d / "libnccl.so.2").exists():
            return CUDA / d
    pytest.skip(f"no CUDA toolkit with cuDNN 9 and NCCL 2 under {CUDA} to make a wheel layout from")


def make_wheels(site, static_cudart=True):
    """site/nvidia/<part>/{include,lib}: links to the toolkit's headers and versioned libraries;
    without libcudart_static.a where `static_cudart` is false (wheels that ship the shared runtime only)."""
    lib = toolkit_lib()
    for part, headers, libs in WHEELS:
        libs = [n for n in libs if static_cudart or n != "libcudart_static.a"]
        inc_dir, lib_dir = site / "nvidia" / part / "include", site / "nvidia" / part / "lib"
        inc_dir.mkdir(parents=True)
        lib_dir.mkdir(parents=True)
        for pattern in headers:
            for h in (CUDA / "include").glob(pattern):
                (inc_dir / h.name).symlink_to(h)
        for pattern in libs:
            found = sorted(lib.glob(pattern))
            assert found, f"{pattern} not in {lib}"
            for f in found:
                (lib_dir / f.name).symlink_to(f)
        assert not any(p.name.endswith(".so") for p in lib_dir.iterdir()), "wheels have no unversioned links"
    return site / "nvidia"


def hidden_toolkit_paths():
    """The toolkit's own include and library folders, under every name this machine gives them
    (/usr/local/cuda, the versioned folder it links to, /usr/local where the toolkit is linked in)."""
    prefixes = sorted({str(CUDA), str(CUDA.resolve()), "/usr/local"})
    dirs = [f"{p}/{s}" for p in prefixes
            for s in ("include", "lib", "lib64", "targets/x86_64-linux/include", "targets/x86_64-linux/lib")]
    return prefixes, dirs


def cache_values(build):
    values = {}
    for line in (build / "CMakeCache.txt").read_text().splitlines():
        m = re.match(r"^([A-Za-z_0-9]+):[A-Z]+=(.*)$", line)
        if m:
            values[m.group(1)] = m.group(2)
    return values


def pybind11_dir(tmp_path):
    """pybind11's CMake folder; where pybind11 is only a build requirement (CI's Python after
    `pip install --no-build-isolation .`), a stand-in that declares its header target: nothing is compiled here."""
    try:
        import pybind11
        return pybind11.get_cmake_dir()
    except ImportError:
        stub = tmp_path / "pybind11-stub"
        stub.mkdir()
        (stub / "pybind11Config.cmake").write_text("add_library(pybind11::headers INTERFACE IMPORTED)\n")
        return stub


@pytest.mark.parametrize("static_cudart", [True, False], ids=["static-cudart", "shared-cudart-only"])
def test_real_cmakelists_takes_cuda_libraries_from_the_wheels(tmp_path, static_cudart):
    exe = cmake()
    if not NVCC.exists():
        pytest.skip(f"no nvcc at {NVCC}")
    site = tmp_path / "site-packages"
    nvidia = make_wheels(site, static_cudart)
    prefixes, dirs = hidden_toolkit_paths()
    build = tmp_path / "build"
    # The wheels are found through the Python's sys.path (PYTHONPATH here, site-packages on a node).
    env = dict(os.environ, PYTHONPATH=str(site))
    r = subprocess.run(
        [exe, "-S", str(ROOT), "-B", str(build), "-G", "Ninja" if shutil.which("ninja") else "Unix Makefiles",
         f"-DPython_EXECUTABLE={sys.executable}", f"-Dpybind11_DIR={pybind11_dir(tmp_path)}",
         "-DHPCNN_CUDA=ON", "-DHPCNN_NCCL=ON", "-DHPCNN_MPI=OFF", "-DCMAKE_CUDA_ARCHITECTURES=90",
         f"-DCMAKE_CUDA_COMPILER={NVCC}",
         "-DCMAKE_IGNORE_PATH=" + ";".join(dirs), "-DCMAKE_IGNORE_PREFIX_PATH=" + ";".join(prefixes)],
        env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert "NVIDIA pip wheels searched last" in r.stdout
    v = cache_values(build)
    expect = {
        "HPCNN_CUDNN_LIBRARY": nvidia / "cudnn" / "lib" / "libcudnn.so.9",
        "HPCNN_CUDNN_INCLUDE_DIR": nvidia / "cudnn" / "include",
        "HPCNN_NCCL_LIBRARY": nvidia / "nccl" / "lib" / "libnccl.so.2",
        "HPCNN_NCCL_INCLUDE_DIR": nvidia / "nccl" / "include",
        "HPCNN_CUBLAS_INCLUDE_DIR": nvidia / "cu13" / "include",
        "CUDA_cublas_LIBRARY": nvidia / "cu13" / "lib" / "libcublas.so.13",
        "CUDA_cublasLt_LIBRARY": nvidia / "cu13" / "lib" / "libcublasLt.so.13",
    }
    # The CUDA runtime: static where the wheels have it, else their shared one (and the configure
    # says which it took).
    runtime = nvidia / "cu13" / "lib" / ("libcudart_static.a" if static_cudart else "libcudart.so.13")
    expect["CUDA_cudart_static_LIBRARY" if static_cudart else "CUDA_cudart_LIBRARY"] = runtime
    kind = "static" if static_cudart else "shared"
    assert f"hpcnn: CUDA runtime linked {kind}: {runtime}" in r.stdout, r.stdout[-4000:]
    # Compared as written, not resolved: the wheels' files are links to the hidden toolkit's.
    for key, path in expect.items():
        assert v.get(key) == str(path), f"{key} = {v.get(key)!r}, expected the wheel's {path}"
    # The installed module loads them from where they were found: the wheels' lib folders.
    ninja = (build / "build.ninja")
    text = ninja.read_text() if ninja.exists() else ""
    for part in ("cu13", "cudnn", "nccl"):
        assert str(nvidia / part / "lib") in text, f"{part}'s lib folder is not in the module's RPATH"
    # the module links the runtime found, the static one only where it exists
    assert str(runtime) in text
    assert ("libcudart_static" in text) == static_cudart


ORDER_PROJECT = """
cmake_minimum_required(VERSION 3.24)
project(wheel_order LANGUAGES C)
set(HPCNN_NVIDIA_WHEELS "${WHEELS}")
include("${HPCNN_SOURCE}/cmake/nvidia_wheels.cmake")
hpcnn_use_nvidia_wheels()
hpcnn_find_cuda_library(HPCNN_CUDNN HEADER cudnn_version.h NAMES cudnn HINTS ${TOOLKIT})
message(STATUS "RESULT ${HPCNN_CUDNN_LIBRARY} ${HPCNN_CUDNN_INCLUDE_DIR}")
"""


@pytest.mark.parametrize("toolkit_has_cudnn", [True, False], ids=["toolkit-first", "wheel-fallback"])
def test_a_toolkit_cudnn_wins_over_the_wheels(tmp_path, toolkit_has_cudnn):
    exe = cmake()
    lib = toolkit_lib()
    nvidia = make_wheels(tmp_path / "site-packages")
    # A fake toolkit: headers and an unversioned link, as toolkits and conda have them.
    toolkit = tmp_path / "toolkit"
    (toolkit / "include").mkdir(parents=True)
    (toolkit / "lib").mkdir()
    if toolkit_has_cudnn:
        (toolkit / "include" / "cudnn_version.h").symlink_to(CUDA / "include" / "cudnn_version.h")
        (toolkit / "lib" / "libcudnn.so.9").symlink_to(lib / "libcudnn.so.9")
        (toolkit / "lib" / "libcudnn.so").symlink_to("libcudnn.so.9")
    src = tmp_path / "project"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(ORDER_PROJECT)
    prefixes, dirs = hidden_toolkit_paths()
    r = subprocess.run(
        [exe, "-S", str(src), "-B", str(tmp_path / "build"), f"-DWHEELS={nvidia}", f"-DTOOLKIT={toolkit}",
         f"-DHPCNN_SOURCE={ROOT}", "-DCMAKE_IGNORE_PATH=" + ";".join(dirs),
         "-DCMAKE_IGNORE_PREFIX_PATH=" + ";".join(prefixes)],
        capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    found = re.search(r"RESULT (\S+) (\S+)", r.stdout)
    assert found, r.stdout
    if toolkit_has_cudnn:
        assert found.groups() == (str(toolkit / "lib" / "libcudnn.so"), str(toolkit / "include"))
    else:
        assert found.groups() == (str(nvidia / "cudnn" / "lib" / "libcudnn.so.9"), str(nvidia / "cudnn" / "include"))
