# Resolves the AUTO|ON|OFF options into COLL_HAVE_CUDA / COLL_HAVE_IB.
# ON fails the configure when the dependency is missing; AUTO quietly turns it off.

foreach(opt COLL_ENABLE_CUDA COLL_ENABLE_IB)
  if(NOT ${opt} MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "${opt}=${${opt}}: use AUTO, ON or OFF")
  endif()
endforeach()

# CUDA: the toolkit is looked for on PATH and in /usr/local/cuda.
set(COLL_HAVE_CUDA OFF)
if(NOT COLL_ENABLE_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # Real code for every listed architecture and PTX for the last (newer GPUs JIT it):
    # "80;90" -> "80-real;90".
    set(_archs ${COLL_CUDA_ARCHITECTURES})
    list(POP_BACK _archs _last)
    list(TRANSFORM _archs APPEND "-real")
    set(CMAKE_CUDA_ARCHITECTURES ${_archs} ${_last})
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(COLL_HAVE_CUDA ON)
  elseif(COLL_ENABLE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "COLL_ENABLE_CUDA=ON but no nvcc was found (set CMAKE_CUDA_COMPILER)")
  endif()
endif()

# InfiniBand: headers at build time; the library itself is loaded at run time.
set(COLL_HAVE_IB OFF)
if(NOT COLL_ENABLE_IB STREQUAL "OFF")
  find_path(IBVERBS_INCLUDE_DIR infiniband/verbs.h)
  if(IBVERBS_INCLUDE_DIR)
    set(COLL_HAVE_IB ON)
  elseif(COLL_ENABLE_IB STREQUAL "ON")
    message(FATAL_ERROR "COLL_ENABLE_IB=ON but infiniband/verbs.h was not found (apt-get install libibverbs-dev)")
  endif()
endif()
