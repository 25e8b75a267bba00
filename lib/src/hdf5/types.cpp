#include "hdf5/types.hpp"

#include <hdf5.h>

#include <algorithm>

#include "hdf5/hdf5_error.hpp"

namespace h5dcp::detail {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "h5dcp writes little-endian types straight from memory; big-endian hosts are not supported");

namespace {

Handle copy_of(hid_t predefined) { return Handle(check_id(H5Tcopy(predefined), "H5Tcopy"), H5Tclose); }

// An IEEE-style float of `bytes` bytes: the sign in the top bit,
// `exponent_bits` below it, the mantissa in the rest (docs/FORMAT.md lists
// each: float16, bfloat16 and the float8 variants).
Handle small_float(std::size_t bytes, std::size_t exponent_bits, std::size_t exponent_bias) {
  auto t = copy_of(H5T_IEEE_F32LE);
  const std::size_t bits = 8 * bytes;
  const std::size_t mantissa_bits = bits - 1 - exponent_bits;
  // Fields first (they must fit the current 4-byte size), then shrink.
  check_status(H5Tset_fields(t.get(), bits - 1, mantissa_bits, exponent_bits, 0, mantissa_bits), "H5Tset_fields");
  check_status(H5Tset_precision(t.get(), bits), "H5Tset_precision");
  check_status(H5Tset_size(t.get(), bytes), "H5Tset_size");
  check_status(H5Tset_ebias(t.get(), exponent_bias), "H5Tset_ebias");
  return t;
}

// h5py's complex: a compound of two floats named "r" and "i", real first.
Handle complex_of(Handle part) {
  const auto part_size = H5Tget_size(part.get());
  Handle t(check_id(H5Tcreate(H5T_COMPOUND, 2 * part_size), "H5Tcreate"), H5Tclose);
  check_status(H5Tinsert(t.get(), "r", 0, part.get()), "H5Tinsert");
  check_status(H5Tinsert(t.get(), "i", part_size, part.get()), "H5Tinsert");
  return t;
}

}  // namespace

Handle hdf5_type(DType dtype) {
  switch (dtype) {
    case DType::Float64: return copy_of(H5T_IEEE_F64LE);
    case DType::Float32: return copy_of(H5T_IEEE_F32LE);
    case DType::Float16: return small_float(2, 5, 15);
    case DType::BFloat16: return small_float(2, 8, 127);
    case DType::Int64: return copy_of(H5T_STD_I64LE);
    case DType::Int32: return copy_of(H5T_STD_I32LE);
    case DType::Int16: return copy_of(H5T_STD_I16LE);
    case DType::Int8: return copy_of(H5T_STD_I8LE);
    case DType::UInt8: return copy_of(H5T_STD_U8LE);
    case DType::Bool: {
      Handle t(check_id(H5Tenum_create(H5T_STD_I8LE), "H5Tenum_create"), H5Tclose);
      const signed char false_value = 0;
      const signed char true_value = 1;
      check_status(H5Tenum_insert(t.get(), "FALSE", &false_value), "H5Tenum_insert");
      check_status(H5Tenum_insert(t.get(), "TRUE", &true_value), "H5Tenum_insert");
      return t;
    }
    case DType::UInt16: return copy_of(H5T_STD_U16LE);
    case DType::UInt32: return copy_of(H5T_STD_U32LE);
    case DType::UInt64: return copy_of(H5T_STD_U64LE);
    // The float8 variants differ from IEEE rules in their special values
    // (e4m3fn has no infinities; the fnuz ones have one NaN, 0x80, and no -0):
    // HDF5 and h5py convert them with IEEE rules, h5dcp copies their bytes.
    case DType::Float8_e4m3fn: return small_float(1, 4, 7);
    case DType::Float8_e5m2: return small_float(1, 5, 15);
    case DType::Float8_e4m3fnuz: return small_float(1, 4, 8);
    case DType::Float8_e5m2fnuz: return small_float(1, 5, 16);
    // A power-of-two scale, 2^(x-127), 0xFF NaN: no sign and no mantissa,
    // which an HDF5 float type cannot describe; the biased exponent as an
    // unsigned byte (the h5dcp.dtype attribute tells it apart from uint8).
    case DType::Float8_e8m0fnu: return copy_of(H5T_STD_U8LE);
    case DType::Complex32: return complex_of(small_float(2, 5, 15));
    case DType::Complex64: return complex_of(copy_of(H5T_IEEE_F32LE));
    case DType::Complex128: return complex_of(copy_of(H5T_IEEE_F64LE));
  }
  throw_hdf5_error("mapping an unknown dtype");
}

Handle fixed_string_type(std::size_t bytes) {
  auto t = copy_of(H5T_C_S1);
  check_status(H5Tset_size(t.get(), std::max<std::size_t>(bytes, 1)), "H5Tset_size");
  check_status(H5Tset_cset(t.get(), H5T_CSET_UTF8), "H5Tset_cset");
  check_status(H5Tset_strpad(t.get(), H5T_STR_NULLPAD), "H5Tset_strpad");
  return t;
}

Handle variable_string_memory_type(hid_t stored) {
  return {check_id(H5Tget_native_type(stored, H5T_DIR_DEFAULT), "H5Tget_native_type"), H5Tclose};
}

}  // namespace h5dcp::detail
