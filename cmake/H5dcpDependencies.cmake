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

find_package(Torch REQUIRED)
