// Planted for layout.compiler_guard.hdf5: a file that sees what the api layer
// sees and includes HDF5. Only lib/src/hdf5 may (its object library links
// HDF5 PRIVATE, lib/CMakeLists.txt), so this must fail to compile.
#include <hdf5.h>

int planted_hdf5_in_api() { return H5open(); }
