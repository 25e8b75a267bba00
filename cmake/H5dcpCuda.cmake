# H5DCP_CUDA (AUTO/ON/OFF): compile h5dcp's CUDA code paths (side-stream
# host -> GPU copies in recursive_to) only when the LibTorch found was built
# with CUDA. Debian's LibTorch is CPU-only: AUTO then turns them off and
# everything builds and runs without CUDA. The code uses LibTorch's
# device-generic c10 stream/event interfaces, so no CUDA toolkit headers are
# needed beyond what LibTorch's own targets bring.
#
# Sets H5DCP_WITH_CUDA (TRUE/FALSE); h5dcp_use_cuda_setting(<target>) turns it
# into the private compile definition H5DCP_WITH_CUDA=0/1.

set(H5DCP_CUDA AUTO CACHE STRING "CUDA code paths: AUTO (when LibTorch has CUDA), ON (required), OFF")
set_property(CACHE H5DCP_CUDA PROPERTY STRINGS AUTO ON OFF)

# A CUDA LibTorch's package defines the torch_cuda / c10_cuda targets and
# sets CAFFE2_USE_CUDA; a CPU-only one none of them.
if(TARGET torch_cuda OR TARGET c10_cuda OR CAFFE2_USE_CUDA)
  set(H5DCP_TORCH_HAS_CUDA TRUE)
else()
  set(H5DCP_TORCH_HAS_CUDA FALSE)
endif()

if(H5DCP_CUDA STREQUAL "ON" AND NOT H5DCP_TORCH_HAS_CUDA)
  message(FATAL_ERROR "H5DCP_CUDA=ON needs a LibTorch built with CUDA, but LibTorch ${Torch_VERSION} found at "
                      "${Torch_DIR} was built without CUDA. Use the CUDA build (scripts/cuda-check.sh installs the "
                      "CUDA wheel of torch 2.14.1), point Torch_DIR at one, or use H5DCP_CUDA=AUTO or OFF.")
endif()
if(H5DCP_TORCH_HAS_CUDA AND NOT H5DCP_CUDA STREQUAL "OFF")
  set(H5DCP_WITH_CUDA TRUE)
else()
  set(H5DCP_WITH_CUDA FALSE)
endif()
message(STATUS "h5dcp: CUDA code paths ${H5DCP_WITH_CUDA} (H5DCP_CUDA=${H5DCP_CUDA}, LibTorch with CUDA: ${H5DCP_TORCH_HAS_CUDA})")

function(h5dcp_use_cuda_setting target)
  if(H5DCP_WITH_CUDA)
    target_compile_definitions(${target} PRIVATE H5DCP_WITH_CUDA=1)
  else()
    target_compile_definitions(${target} PRIVATE H5DCP_WITH_CUDA=0)
  endif()
endfunction()
