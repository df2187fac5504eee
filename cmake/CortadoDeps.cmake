# Finds what libcortado links with and collects it in CT_DEP_TARGETS.
# Required: protobuf-c (+ protoc-c), OpenBLAS, liblmdb, libleveldb, libjpeg,
# libpng, HDF5, pthreads.  Optional (auto-detected, each sets CORTADO_HAVE_X):
# MPI, hiredis, Gloo, OpenMP, oneDNN, cairo (the command only).  With CUDA: cudart, cuBLAS, cuBLASLt, cuDNN, NCCL.
# Point CMAKE_PREFIX_PATH at a folder to find libraries unpacked outside /usr.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
set(CT_DEP_TARGETS Threads::Threads m)

find_program(PROTOC_C NAMES protoc-c protoc-gen-c HINTS ${CMAKE_PREFIX_PATH} PATH_SUFFIXES bin usr/bin)
if(NOT PROTOC_C)
  message(FATAL_ERROR "protoc-c not found: run scripts/install-deps.sh (Debian: protobuf-c-compiler)")
endif()

# A library found by header + name, as an imported target ct::NAME.
function(ct_find_lib name header libnames)
  find_path(${name}_INCLUDE_DIR ${header} PATH_SUFFIXES include usr/include usr/include/x86_64-linux-gnu)
  find_library(${name}_LIBRARY NAMES ${libnames}
    PATH_SUFFIXES lib lib64 usr/lib usr/lib/x86_64-linux-gnu lib/x86_64-linux-gnu)
  if(${name}_INCLUDE_DIR AND ${name}_LIBRARY)
    add_library(ct::${name} UNKNOWN IMPORTED GLOBAL)
    set_target_properties(ct::${name} PROPERTIES
      IMPORTED_LOCATION ${${name}_LIBRARY}
      INTERFACE_INCLUDE_DIRECTORIES ${${name}_INCLUDE_DIR})
    set(${name}_FOUND ON PARENT_SCOPE)
  else()
    set(${name}_FOUND OFF PARENT_SCOPE)
  endif()
endfunction()

function(ct_require name header libnames debian)
  ct_find_lib(${name} ${header} "${libnames}")
  if(NOT ${name}_FOUND)
    message(FATAL_ERROR "${name} not found (${header}): run scripts/install-deps.sh (Debian: ${debian})")
  endif()
endfunction()

ct_require(protobufc protobuf-c/protobuf-c.h protobuf-c libprotobuf-c-dev)
ct_require(openblas cblas.h "openblas;openblasp;openblaso" libopenblas-dev)
# Debian puts OpenBLAS's cblas.h under include/x86_64-linux-gnu/openblas-pthread.
find_path(OPENBLAS_CBLAS_DIR cblas.h PATH_SUFFIXES include/x86_64-linux-gnu/openblas-pthread
  usr/include/x86_64-linux-gnu/openblas-pthread include/openblas NO_DEFAULT_PATH
  PATHS ${CMAKE_PREFIX_PATH} /usr)
if(OPENBLAS_CBLAS_DIR)
  set_property(TARGET ct::openblas APPEND PROPERTY INTERFACE_INCLUDE_DIRECTORIES ${OPENBLAS_CBLAS_DIR})
endif()
ct_require(lmdb lmdb.h lmdb liblmdb-dev)
ct_require(leveldb leveldb/c.h leveldb libleveldb-dev)
ct_require(jpeg jpeglib.h jpeg libjpeg-dev)
ct_require(png png.h png16 libpng-dev)
ct_require(zlib zlib.h z zlib1g-dev)
list(APPEND CT_DEP_TARGETS ct::protobufc ct::openblas ct::lmdb ct::leveldb ct::jpeg ct::png ct::zlib)

set(HDF5_PREFER_PARALLEL OFF)
find_package(HDF5 COMPONENTS C)
if(HDF5_FOUND)
  add_library(ct::hdf5 INTERFACE IMPORTED GLOBAL)
  set_target_properties(ct::hdf5 PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${HDF5_C_INCLUDE_DIRS}"
    INTERFACE_LINK_LIBRARIES "${HDF5_C_LIBRARIES}")
  list(APPEND CT_DEP_TARGETS ct::hdf5)
else()
  message(FATAL_ERROR "HDF5 not found: run scripts/install-deps.sh (Debian: libhdf5-dev)")
endif()

find_package(MPI COMPONENTS C QUIET)
if(MPI_C_FOUND)
  set(CORTADO_HAVE_MPI ON)
  list(APPEND CT_DEP_TARGETS MPI::MPI_C)
else()
  set(CORTADO_HAVE_MPI OFF)
endif()

ct_find_lib(hiredis hiredis/hiredis.h hiredis)
if(hiredis_FOUND)
  set(CORTADO_HAVE_HIREDIS ON)
  list(APPEND CT_DEP_TARGETS ct::hiredis)
else()
  set(CORTADO_HAVE_HIREDIS OFF)
endif()

ct_find_lib(gloo gloo/allreduce_ring.h gloo)
if(gloo_FOUND AND hiredis_FOUND)
  set(CORTADO_HAVE_GLOO ON)
  list(APPEND CT_DEP_TARGETS ct::gloo)
else()
  set(CORTADO_HAVE_GLOO OFF)
endif()
message(STATUS "Cortado: MPI ${CORTADO_HAVE_MPI}, hiredis ${CORTADO_HAVE_HIREDIS}, Gloo ${CORTADO_HAVE_GLOO}")

# cairo draws `cortado plot`'s charts; only the command links it, and
# without it the command says so (optional: the library does not need it).
pkg_check_modules(CAIRO QUIET IMPORTED_TARGET cairo)
if(CAIRO_FOUND)
  set(CORTADO_HAVE_CAIRO ON)
else()
  set(CORTADO_HAVE_CAIRO OFF)
  message(STATUS "Cortado: cairo not found: `cortado plot` will say so (Debian: libcairo2-dev)")
endif()
message(STATUS "Cortado: cairo ${CORTADO_HAVE_CAIRO}")

# OpenMP: the host's data-parallel loops (src/core/parallel.c) run on its
# thread team, the same one oneDNN uses.  Without it those loops run serially.
find_package(OpenMP COMPONENTS C QUIET)
if(OpenMP_C_FOUND)
  set(CORTADO_HAVE_OPENMP ON)
  list(APPEND CT_DEP_TARGETS OpenMP::OpenMP_C)
else()
  set(CORTADO_HAVE_OPENMP OFF)
endif()

# oneDNN (Debian: libdnnl-dev): the fast engine of CPU convolutions.  Without
# it (or with -DCORTADO_DNNL=OFF) every convolution takes the im2col + GEMM
# reference path.  Files named *_dnnl.c are compiled only when it is found.
option(CORTADO_DNNL "Use oneDNN for CPU convolutions when it is found" ON)
set(CORTADO_HAVE_DNNL OFF)
if(CORTADO_DNNL)
  ct_find_lib(dnnl oneapi/dnnl/dnnl.h dnnl)
  if(dnnl_FOUND)
    set(CORTADO_HAVE_DNNL ON)
    set_property(TARGET ct::dnnl APPEND PROPERTY INTERFACE_COMPILE_DEFINITIONS CORTADO_HAVE_DNNL=1)
    list(APPEND CT_DEP_TARGETS ct::dnnl)
  endif()
endif()
# What a static link of libcortado needs besides (cortado.pc).
set(CT_PC_LIBS_EXTRA "")
if(CORTADO_HAVE_DNNL)
  string(APPEND CT_PC_LIBS_EXTRA " -ldnnl")
endif()
if(CORTADO_HAVE_OPENMP)
  string(APPEND CT_PC_LIBS_EXTRA " ${OpenMP_C_FLAGS}")
endif()
if(CORTADO_HAVE_GLOO)
  # shards: Gloo (C++, behind src/parallel/gloo_shim.cc) and hiredis
  string(APPEND CT_PC_LIBS_EXTRA " -lgloo -lhiredis -lstdc++")
endif()
if(CORTADO_HAVE_DNNL)
  message(STATUS "Cortado: OpenMP ${CORTADO_HAVE_OPENMP}, oneDNN ON (CPU convolutions: oneDNN, im2col + GEMM for engine: CAFFE)")
else()
  message(STATUS "Cortado: OpenMP ${CORTADO_HAVE_OPENMP}, oneDNN OFF (CPU convolutions: im2col + GEMM only; Debian: libdnnl-dev)")
endif()

if(CORTADO_HAVE_CUDA)
  ct_find_lib(cudnn cudnn.h cudnn)
  ct_find_lib(nccl nccl.h nccl)
  if(NOT cudnn_FOUND OR NOT nccl_FOUND)
    message(FATAL_ERROR "cuDNN or NCCL not found next to the CUDA toolkit")
  endif()
  list(APPEND CT_DEP_TARGETS CUDA::cudart CUDA::cublas CUDA::cublasLt ct::cudnn ct::nccl)
endif()
