#include "formats/pickle_value.hpp"

namespace h5dcp::detail::pickle {

std::string describe(const Object& object) {
  switch (object.kind) {
    case Kind::None: return "None";
    case Kind::Bool: return "a bool";
    case Kind::Int: return "an int";
    case Kind::Float: return "a float";
    case Kind::Str: return "a str";
    case Kind::Bytes: return "bytes";
    case Kind::List: return "a list";
    case Kind::Tuple: return "a tuple";
    case Kind::Dict: return "a dict";
    case Kind::Tensor: return "a tensor";
    case Kind::Storage: return "a storage";
    case Kind::Global: return (object.unstorable_tensor ? "a tensor of dtype " : "") + object.text + "." + object.name;
    case Kind::Instance: return "a " + object.text + "." + object.name;
  }
  return "an unknown object";
}

const char* storage_class_name(DType dtype) noexcept {
  switch (dtype) {
    case DType::Float64: return "DoubleStorage";
    case DType::Float32: return "FloatStorage";
    case DType::Float16: return "HalfStorage";
    case DType::BFloat16: return "BFloat16Storage";
    case DType::Int64: return "LongStorage";
    case DType::Int32: return "IntStorage";
    case DType::Int16: return "ShortStorage";
    case DType::Int8: return "CharStorage";
    case DType::UInt8: return "ByteStorage";
    case DType::Bool: return "BoolStorage";
    case DType::Complex64: return "ComplexFloatStorage";
    case DType::Complex128: return "ComplexDoubleStorage";
    default: return nullptr;
  }
}

}  // namespace h5dcp::detail::pickle
