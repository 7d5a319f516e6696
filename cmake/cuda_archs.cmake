# The CUDA architectures a build really contains, for build_info()['cuda_archs'].
#
# CMAKE_CUDA_ARCHITECTURES may be a keyword (all, all-major, native) that CMake hands to nvcc as
# -arch=<keyword>: nvcc alone decides the list, and CMake's own tables lag behind new CUDA
# versions (CMake 3.25 thinks all-major is 35..90 even for CUDA 13, which builds 75..120).
# So ask nvcc: `nvcc -arch=<keyword> --dryrun` prints the fatbinary command with one
# "--image3=kind=elf,sm=NN" per architecture it compiles machine code for (and kind=ptx for
# the PTX it embeds). An explicit list ("80;90", "80-real;90-virtual") is reported as given.
#
# hpcnn_cuda_built_archs(<sass_var> <ptx_var>): ";"-separated lists, e.g. "75;80;90;100;110;120"
# and "120"; "unknown" when nvcc's answer cannot be read.
function(hpcnn_cuda_built_archs sass_var ptx_var)
  set(requested "${CMAKE_CUDA_ARCHITECTURES}")
  if(requested MATCHES "^(all|all-major|native)$")
    execute_process(
      COMMAND ${CMAKE_CUDA_COMPILER} -arch=${requested} --dryrun -c hpcnn_arch_probe.cu
      WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}
      OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
    string(REGEX MATCHALL "kind=elf,sm=[0-9]+" elf "${out}${err}")
    string(REGEX MATCHALL "kind=ptx,sm=[0-9]+" ptx "${out}${err}")
    list(TRANSFORM elf REPLACE "kind=elf,sm=" "")
    list(TRANSFORM ptx REPLACE "kind=ptx,sm=" "")
    list(REMOVE_DUPLICATES elf)
    list(REMOVE_DUPLICATES ptx)
    if(NOT elf)
      set(elf "unknown")
    endif()
    if(NOT ptx)
      set(ptx "none")
    endif()
  else()
    set(elf "")
    set(ptx "")
    foreach(a IN LISTS requested)
      string(REGEX MATCH "^[0-9]+[a-z]?" n "${a}")
      if(NOT a MATCHES "-virtual$")
        list(APPEND elf ${n})
      endif()
      if(NOT a MATCHES "-real$")
        list(APPEND ptx ${n})
      endif()
    endforeach()
  endif()
  set(${sass_var} "${elf}" PARENT_SCOPE)
  set(${ptx_var} "${ptx}" PARENT_SCOPE)
endfunction()
