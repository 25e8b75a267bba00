#pragma once
// HDF5 types for h5dcp dtypes (docs/FORMAT.md, "Element types"). Memory and
// file use the same (little-endian) type, so HDF5 copies bytes unconverted.

#include <cstddef>

#include "h5dcp/dtype.hpp"
#include "hdf5/handle.hpp"

namespace h5dcp::detail {

/// A new HDF5 datatype for `dtype`: IEEE floats, little-endian integers,
/// IEEE half for float16, a 2-byte float with 8 exponent bits for bfloat16,
/// an int8 enum {FALSE=0, TRUE=1} (h5py's bool) for bool, unsigned integers,
/// 1-byte floats for the float8 variants (float8_e8m0fnu: its exponent byte
/// as uint8), and h5py's {r, i} compound for complex.
Handle hdf5_type(DType dtype);

/// A fixed-length UTF-8 string of `bytes` bytes (at least 1), NUL-padded: the
/// type of every string h5dcp writes. Never variable length: parallel HDF5
/// cannot write variable-length data to datasets, and a variable-length
/// attribute keeps its text in a global heap, whose reader in HDF5 1.10
/// crashes on a damaged heap instead of failing (HDFGroup/hdf5#2662).
Handle fixed_string_type(std::size_t bytes);

/// The memory type to read the variable-length string type `stored` into
/// (other writers, and h5dcp before format 1.2, store strings so): its own
/// character set, as HDF5 1.10 converts between none.
Handle variable_string_memory_type(Hid stored);

}  // namespace h5dcp::detail
