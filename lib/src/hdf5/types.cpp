#include "hdf5/types.hpp"

#include "hdf5/hdf5_error.hpp"

namespace h5dcp::detail {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "h5dcp writes little-endian types straight from memory; big-endian hosts are not supported");

namespace {

Handle copy_of(hid_t predefined) { return Handle(check_id(H5Tcopy(predefined), "H5Tcopy"), H5Tclose); }

// A 2-byte IEEE-style float: sign bit 15, `exponent_bits` above the mantissa.
Handle half_float(std::size_t exponent_bits, std::size_t exponent_bias) {
  auto t = copy_of(H5T_IEEE_F32LE);
  const std::size_t mantissa_bits = 15 - exponent_bits;
  // Fields first (they must fit the current 4-byte size), then shrink.
  check_status(H5Tset_fields(t.get(), 15, mantissa_bits, exponent_bits, 0, mantissa_bits), "H5Tset_fields");
  check_status(H5Tset_precision(t.get(), 16), "H5Tset_precision");
  check_status(H5Tset_size(t.get(), 2), "H5Tset_size");
  check_status(H5Tset_ebias(t.get(), exponent_bias), "H5Tset_ebias");
  return t;
}

}  // namespace

Handle hdf5_type(DType dtype) {
  switch (dtype) {
    case DType::Float64: return copy_of(H5T_IEEE_F64LE);
    case DType::Float32: return copy_of(H5T_IEEE_F32LE);
    case DType::Float16: return half_float(5, 15);
    case DType::BFloat16: return half_float(8, 127);
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
  }
  throw_hdf5_error("mapping an unknown dtype");
}

Handle string_type() {
  auto t = copy_of(H5T_C_S1);
  check_status(H5Tset_size(t.get(), H5T_VARIABLE), "H5Tset_size");
  check_status(H5Tset_cset(t.get(), H5T_CSET_UTF8), "H5Tset_cset");
  return t;
}

}  // namespace h5dcp::detail
