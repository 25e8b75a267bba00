#pragma once
// HDF5 types for h5dcp dtypes (docs/FORMAT.md, "Element types"). Memory and
// file use the same (little-endian) type, so HDF5 copies bytes unconverted.

#include "h5dcp/dtype.hpp"
#include "hdf5/handle.hpp"

namespace h5dcp::detail {

/// A new HDF5 datatype for `dtype`: IEEE floats, little-endian integers,
/// IEEE half for float16, a 2-byte float with 8 exponent bits for bfloat16,
/// an int8 enum {FALSE=0, TRUE=1} (h5py's bool) for bool, unsigned integers,
/// 1-byte floats for the float8 variants (float8_e8m0fnu: its exponent byte
/// as uint8), and h5py's {r, i} compound for complex.
Handle hdf5_type(DType dtype);

/// A variable-length UTF-8 string type, for string attributes.
Handle string_type();

}  // namespace h5dcp::detail
