# The NCCL communicators (nccl_communicator.cpp, ours; c10d_nccl_communicator.cpp, LibTorch's
# ProcessGroupNCCL), included at the end of runtime/CMakeLists.txt
# after find_package(Torch). It is built only when all of these are found:
#   1. the CUDA toolkit (headers and the CUDA::cudart target),
#   2. a CUDA build of the venv's torch (the c10_cuda and torch_cuda targets),
#   3. the NCCL of the venv's torch wheel (nvidia/nccl under DDP_SITE_PACKAGES).
# We use the wheel's NCCL, not /usr/local/cuda's: libtorch_cuda loads the wheel's libnccl.so.2,
# and two NCCLs of different versions in one process conflict.
# On success: DDP_HAVE_NCCL is ON and ddp_runtime carries the public define DDP_WITH_NCCL=1, so
# users' code can #ifdef it; otherwise a status message says what is missing.

set(DDP_HAVE_NCCL OFF)
set(DDP_HAVE_NCCL OFF CACHE INTERNAL "Whether ddp_runtime has the NCCL communicator")

function(ddp_nccl_off why)
  message(STATUS "ddplaunch: NCCL communicator off: ${why}")
endfunction()

# Torch's Caffe2 config has already run find_package(CUDAToolkit) for a CUDA build; this finds it
# again (a no-op then) or for the first time with a CPU-only torch.
find_package(CUDAToolkit QUIET)

set(DDP_NCCL_ROOT "${DDP_SITE_PACKAGES}/nvidia/nccl")
find_path(DDP_NCCL_INCLUDE_DIR nccl.h PATHS "${DDP_NCCL_ROOT}/include" NO_DEFAULT_PATH)
find_library(DDP_NCCL_LIBRARY NAMES libnccl.so.2 nccl PATHS "${DDP_NCCL_ROOT}/lib" NO_DEFAULT_PATH)

if(DDP_TORCH_CPU_ONLY)
  ddp_nccl_off("LibTorch's CPU libraries only (runtime/CMakeLists.txt, DDP_TORCH_CPU_ONLY)")
elseif(NOT CUDAToolkit_FOUND OR NOT TARGET CUDA::cudart)
  ddp_nccl_off("no CUDA toolkit (set CUDAToolkit_ROOT, e.g. /usr/local/cuda)")
elseif(NOT TARGET c10_cuda OR NOT TARGET torch_cuda)
  ddp_nccl_off("the torch of DDP_PYTHON=${DDP_PYTHON} is not a CUDA build (no c10_cuda/torch_cuda)")
elseif(NOT DDP_NCCL_INCLUDE_DIR OR NOT DDP_NCCL_LIBRARY)
  ddp_nccl_off("no NCCL in ${DDP_NCCL_ROOT} (pip install the nvidia-nccl wheel matching torch)")
else()
  target_sources(ddp_runtime PRIVATE nccl_communicator.cpp c10d_nccl_communicator.cpp stream_overlap.cpp
                                     gpu_rank.cpp)
  # Only our .cpp includes nccl.h: the public header hides NCCL behind a pimpl.
  target_include_directories(ddp_runtime PRIVATE "${DDP_NCCL_INCLUDE_DIR}")
  # torch_cuda: LibTorch's ProcessGroupNCCL (the nccl-c10d backend; its target carries USE_C10D_NCCL).
  target_link_libraries(ddp_runtime PUBLIC "${DDP_NCCL_LIBRARY}" CUDA::cudart c10_cuda torch_cuda)
  target_compile_definitions(ddp_runtime PUBLIC DDP_WITH_NCCL=1)
  set(DDP_HAVE_NCCL ON)
  set(DDP_HAVE_NCCL ON CACHE INTERNAL "Whether ddp_runtime has the NCCL communicator")
  message(STATUS "ddplaunch: NCCL communicator on (${DDP_NCCL_LIBRARY}, CUDA ${CUDAToolkit_VERSION})")
endif()
