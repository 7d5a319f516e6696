# cuDNN, cuBLAS, NCCL (and the CUDA runtime) from NVIDIA's pip wheels.
#
# Whoever installed PyTorch with pip has them: `nvidia-cudnn-cu13`, `nvidia-nccl-cu13`,
# `nvidia-cublas`, `nvidia-cuda-runtime`, ... unpack into the active Python's site-packages as
#   nvidia/cudnn/{include,lib}    libcudnn.so.9, libcudnn_*.so.9
#   nvidia/nccl/{include,lib}     libnccl.so.2
#   nvidia/cu13/{include,lib,bin} libcublas.so.13, libcublasLt.so.13, libcudart.so.13,
#                                 libcudart_static.a (CUDA 13's toolkit wheels; nvcc's too)
#   nvidia/cublas, nvidia/cuda_runtime, ... ({include,lib})   the same for CUDA 12's wheels
# with versioned `lib*.so.N` files only: no `libcudnn.so` link, so find_library(NAMES cudnn)
# alone never finds them. A GPU node without network often has nothing else (docs/gpu.md,
# "A GPU node without network").
#
# hpcnn_use_nvidia_wheels() makes the find_* calls that follow look there too, AFTER every usual
# place (their HINTS, CUDA's own folders, the system): the folders go to the end of
# CMAKE_SYSTEM_PREFIX_PATH, so a toolkit or conda cuDNN, where one exists, still wins, and a
# normal build is unchanged. The versioned file names are searched for by hpcnn's own lookups
# (HPCNN_CUDA_LIBRARY_SUFFIXES below) and, for the CUDA runtime and cuBLAS that FindCUDAToolkit
# looks up, by hpcnn_find_cuda_toolkit().
#
# Which wheels: HPCNN_NVIDIA_WHEELS, a list of `nvidia` folders, or the `nvidia` folder of every
# entry of ${Python_EXECUTABLE}'s sys.path when it is empty (a build with pip's default build
# isolation does not see the environment's packages: build with --no-build-isolation, or name the
# folder). OFF: no wheels.

set(HPCNN_NVIDIA_WHEELS "" CACHE STRING
  "The 'nvidia' folders of NVIDIA's pip wheels to take cuDNN/cuBLAS/NCCL from when no other is found (empty: those on the Python's sys.path; OFF: none)")

# The library file suffixes the lookups of CUDA libraries accept: the unversioned link first
# (toolkits, conda, Debian's -dev packages), then the SONAMEs the wheels ship (CUDA 13 and 12,
# cuDNN 9 and 8, NCCL 2). Within one folder the unversioned link wins.
set(HPCNN_CUDA_LIBRARY_SUFFIXES ${CMAKE_FIND_LIBRARY_SUFFIXES} .so.13 .so.12 .so.9 .so.8 .so.2)

# The folders under an `nvidia` folder that hold include/ and lib/ of one library (or, cu13/cu12,
# of the CUDA 13/12 toolkit wheels together).
set(_hpcnn_wheel_parts cudnn nccl cu13 cu12 cublas cuda_runtime cuda_nvcc)

function(hpcnn_use_nvidia_wheels)
  if(HPCNN_NVIDIA_WHEELS STREQUAL "OFF")
    set(HPCNN_NVIDIA_WHEEL_ROOTS "" PARENT_SCOPE)
    return()
  endif()
  set(nvidia_dirs ${HPCNN_NVIDIA_WHEELS})
  if(NOT nvidia_dirs AND Python_EXECUTABLE)
    execute_process(
      COMMAND ${Python_EXECUTABLE} -c
        "import os, sys; print(';'.join(dict.fromkeys(os.path.realpath(os.path.join(p or '.', 'nvidia')) for p in sys.path if os.path.isdir(os.path.join(p or '.', 'nvidia')))))"
      OUTPUT_VARIABLE nvidia_dirs OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  endif()
  set(roots "")
  foreach(nvidia IN LISTS nvidia_dirs)
    foreach(part IN LISTS _hpcnn_wheel_parts)
      if(IS_DIRECTORY "${nvidia}/${part}/lib" OR IS_DIRECTORY "${nvidia}/${part}/include")
        list(APPEND roots "${nvidia}/${part}")
      endif()
    endforeach()
  endforeach()
  if(roots)
    list(JOIN roots ", " words)
    message(STATUS "hpcnn: NVIDIA pip wheels searched last: ${words}")
  endif()
  set(CMAKE_SYSTEM_PREFIX_PATH ${CMAKE_SYSTEM_PREFIX_PATH} ${roots} PARENT_SCOPE)
  set(HPCNN_NVIDIA_WHEEL_ROOTS "${roots}" PARENT_SCOPE)
endfunction()

# find_package(CUDAToolkit) that also accepts the versioned libcudart.so.N / libcublas.so.N of the
# wheels (FindCUDAToolkit asks for "cudart" and "cublas" only, which match the unversioned links).
# A macro, so that the targets and variables land in the caller's scope.
macro(hpcnn_find_cuda_toolkit)
  set(_hpcnn_saved_suffixes ${CMAKE_FIND_LIBRARY_SUFFIXES})
  set(CMAKE_FIND_LIBRARY_SUFFIXES ${HPCNN_CUDA_LIBRARY_SUFFIXES})
  find_package(CUDAToolkit ${ARGN})
  set(CMAKE_FIND_LIBRARY_SUFFIXES ${_hpcnn_saved_suffixes})
  unset(_hpcnn_saved_suffixes)
endmacro()

# hpcnn_find_cuda_library(<prefix> HEADER <h> NAMES <names...> HINTS <dirs...>):
# <prefix>_INCLUDE_DIR and <prefix>_LIBRARY (cache), versioned file names accepted.
function(hpcnn_find_cuda_library prefix)
  cmake_parse_arguments(arg "" "HEADER" "NAMES;HINTS" ${ARGN})
  find_path(${prefix}_INCLUDE_DIR NAMES ${arg_HEADER} HINTS ${arg_HINTS} PATH_SUFFIXES include)
  set(CMAKE_FIND_LIBRARY_SUFFIXES ${HPCNN_CUDA_LIBRARY_SUFFIXES})
  find_library(${prefix}_LIBRARY NAMES ${arg_NAMES} HINTS ${arg_HINTS} PATH_SUFFIXES lib lib64)
endfunction()
