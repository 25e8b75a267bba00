# Finds the three real dependencies. Shared with the installed package config
# (h5dcpConfig.cmake re-finds MPI, HDF5 and Torch the same way).

find_package(MPI REQUIRED COMPONENTS C CXX)

# Parallel HDF5 only: a serial HDF5 cannot write one file from many ranks.
set(HDF5_PREFER_PARALLEL ON)
find_package(HDF5 1.10 REQUIRED COMPONENTS C)
if(NOT HDF5_IS_PARALLEL)
  message(FATAL_ERROR
    "h5dcp needs HDF5 built with MPI (parallel HDF5), but the HDF5 found at "
    "'${HDF5_INCLUDE_DIRS}' is serial. On Debian install libhdf5-openmpi-dev; "
    "with Spack use hdf5+mpi; or point HDF5_ROOT at a parallel build.")
endif()
if(NOT TARGET h5dcp_hdf5)
  # One interface target so every consumer uses the same (parallel) HDF5 and
  # never picks up a serial libhdf5 that LibTorch's dependencies may drag in.
  add_library(h5dcp_hdf5 INTERFACE IMPORTED)
  target_include_directories(h5dcp_hdf5 INTERFACE ${HDF5_C_INCLUDE_DIRS} ${HDF5_INCLUDE_DIRS})
  target_link_libraries(h5dcp_hdf5 INTERFACE ${HDF5_C_LIBRARIES})
  target_compile_definitions(h5dcp_hdf5 INTERFACE ${HDF5_C_DEFINITIONS} ${HDF5_DEFINITIONS})
endif()

# LibTorch: by default the one inside the PyTorch wheel of H5DCP_PYTHON
# (scripts/install-deps.sh makes a virtual environment with torch 2.13);
# Torch_DIR or CMAKE_PREFIX_PATH still choose another.
set(H5DCP_TORCH_MIN_VERSION 2.1)
set(H5DCP_PYTHON "" CACHE FILEPATH "Python with torch (and h5py, for the tests); its LibTorch is the default one")
if(NOT H5DCP_PYTHON)
  find_program(H5DCP_PYTHON_FOUND NAMES python3 python)
  if(H5DCP_PYTHON_FOUND)
    set(H5DCP_PYTHON ${H5DCP_PYTHON_FOUND} CACHE FILEPATH "" FORCE)
  endif()
endif()
if(NOT Torch_DIR AND H5DCP_PYTHON)
  execute_process(COMMAND ${H5DCP_PYTHON} -c "import torch.utils; print(torch.utils.cmake_prefix_path)"
    OUTPUT_VARIABLE h5dcp_torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE h5dcp_torch_found)
  if(h5dcp_torch_found EQUAL 0 AND h5dcp_torch_prefix)
    list(APPEND CMAKE_PREFIX_PATH ${h5dcp_torch_prefix})
    # A CUDA wheel's TorchConfig looks for the CUDA toolkit (nvcc: the system's,
    # /usr/local/cuda unless CUDA_TOOLKIT_ROOT_DIR or CUDA_HOME say otherwise)
    # and for libnvrtc, which the wheel's own nvidia-* packages hold beside it.
    get_filename_component(h5dcp_site_packages "${h5dcp_torch_prefix}/../../.." ABSOLUTE)
    file(GLOB h5dcp_wheel_nvrtc "${h5dcp_site_packages}/nvidia/cu*/lib/libnvrtc.so.*")
    list(FILTER h5dcp_wheel_nvrtc EXCLUDE REGEX "builtins|alt")
    if(h5dcp_wheel_nvrtc AND NOT CUDA_nvrtc_LIBRARY)
      list(GET h5dcp_wheel_nvrtc 0 h5dcp_wheel_nvrtc)
      set(CUDA_nvrtc_LIBRARY "${h5dcp_wheel_nvrtc}" CACHE FILEPATH "libnvrtc of the PyTorch wheel")
      if(NOT CUDA_TOOLKIT_ROOT_DIR)
        if(DEFINED ENV{CUDA_HOME})
          set(CUDA_TOOLKIT_ROOT_DIR "$ENV{CUDA_HOME}" CACHE PATH "CUDA toolkit (nvcc)")
        elseif(EXISTS /usr/local/cuda/bin/nvcc)
          set(CUDA_TOOLKIT_ROOT_DIR /usr/local/cuda CACHE PATH "CUDA toolkit (nvcc)")
        endif()
      endif()
    endif()
  endif()
endif()
find_package(Torch QUIET)
if(NOT Torch_FOUND)
  message(FATAL_ERROR "h5dcp needs LibTorch >= ${H5DCP_TORCH_MIN_VERSION}, and none was found: run "
    "scripts/install-deps.sh (a virtual environment with torch 2.13) and pass its python as -DH5DCP_PYTHON=, "
    "or set Torch_DIR to LibTorch's share/cmake/Torch.")
endif()
# Every LibTorch since 1.x ships TorchConfigVersion.cmake: no version is none we know.
set(H5DCP_TORCH_VERSION "${Torch_VERSION}")
if(NOT H5DCP_TORCH_VERSION)
  set(H5DCP_TORCH_VERSION "(unknown: no TorchConfigVersion.cmake)")
endif()
if(NOT Torch_VERSION OR Torch_VERSION VERSION_LESS H5DCP_TORCH_MIN_VERSION)
  message(FATAL_ERROR "h5dcp needs LibTorch >= ${H5DCP_TORCH_MIN_VERSION}, but the one found at ${Torch_DIR} is "
    "${H5DCP_TORCH_VERSION}. Run scripts/install-deps.sh (torch 2.13 in a virtual environment), or point Torch_DIR "
    "at a newer LibTorch.")
endif()
message(STATUS "h5dcp: LibTorch ${H5DCP_TORCH_VERSION} at ${Torch_DIR}")
