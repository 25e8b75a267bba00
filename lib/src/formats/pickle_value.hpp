#pragma once
// The Python objects of a torch.save pickle (its data.pkl), as far as h5dcp
// reads and writes them: None, bool, int, float, str, bytes, list, tuple,
// dict, and tensors that are strided views of storages (the zip records
// data/<key>). Pure data: no torch, no HDF5.

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "h5dcp/dtype.hpp"

namespace h5dcp::detail::pickle {

/// A storage of a torch.save file: the record data/<key>, `numel` elements
/// of `dtype`.
struct Storage {
  std::string key;
  DType dtype = DType::UInt8;
  std::int64_t numel = 0;
  std::string location = "cpu";  ///< where it was saved from ("cpu", "cuda:0", ...)
  /// PyTorch 2.x pickles storages of dtypes without a legacy storage class
  /// (uint16, float8, complex32, ...) as an UntypedStorage of a number of
  /// bytes and names the dtype in _rebuild_tensor_v3. `untyped`: pickled so;
  /// `typed`: the dtype is known (until a tensor gives it, numel counts bytes).
  bool untyped = false;
  bool typed = true;
};

/// A tensor: a strided view of a storage (element offsets and strides).
struct TensorView {
  std::shared_ptr<const Storage> storage;
  std::int64_t storage_offset = 0;
  std::vector<std::int64_t> sizes;
  std::vector<std::int64_t> strides;
};

/// Instance: an object of an allowed class (PyTorch DCP's metadata
/// dataclasses), made by NEWOBJ and filled by BUILD: `text` and `name` name
/// its class, `entries` hold the attributes of a dict state (str keys),
/// `items` a tuple state (TensorProperties pickles one).
enum class Kind : std::uint8_t {
  None,
  Bool,
  Int,
  Float,
  Str,
  Bytes,
  List,
  Tuple,
  Dict,
  Tensor,
  Storage,
  Global,
  Instance
};

struct Object;
/// Objects are shared: a pickle's memo refers to the same object from several
/// places (a list appended to after it was memoized, a tensor saved twice).
using ObjectPtr = std::shared_ptr<Object>;

/// One object of the pickle. Kept small: a pickle of one-byte opcodes makes
/// one object per byte, and the reader's memory is counted per input byte
/// (pickle_reader.cpp): the payload a kind needs beyond a scalar or a
/// container (a tensor's view) is held through a pointer.
struct Object {
  Kind kind = Kind::None;
  bool boolean = false;  ///< Bool
  /// Global: a tensor of the dtype torch.<name>, which h5dcp cannot store. The
  /// reader keeps it as such so that the state dict's walk can name its key.
  bool unstorable_tensor = false;
  union {
    std::int64_t integer = 0;  ///< Int
    double real;               ///< Float
  };
  std::string text;              ///< Str (UTF-8), Bytes (raw); Global, Instance: the module ("torch._utils")
  std::string name;              ///< Global: "_rebuild_tensor_v2"; Instance: the class ("Metadata")
  std::vector<ObjectPtr> items;  ///< List, Tuple; Instance: a tuple state; Global: call arguments (writer only)
  std::vector<std::pair<ObjectPtr, ObjectPtr>> entries;  ///< Dict, in insertion order; Instance: attributes
  std::shared_ptr<const TensorView> tensor;              ///< Tensor
  std::shared_ptr<const Storage> storage;                ///< Storage

  static ObjectPtr none() { return std::make_shared<Object>(); }
  static ObjectPtr of(Kind kind) {
    auto o = std::make_shared<Object>();
    o->kind = kind;
    return o;
  }
  /// An object of `kind` whose `member` holds `value`: the factories below.
  template <typename T>
  static ObjectPtr holding(Kind kind, T Object::*member, std::type_identity_t<T> value) {
    auto o = of(kind);
    o.get()->*member = std::move(value);
    return o;
  }
  static ObjectPtr boolean_of(bool value) { return holding(Kind::Bool, &Object::boolean, value); }
  static ObjectPtr int_of(std::int64_t value) { return holding(Kind::Int, &Object::integer, value); }
  static ObjectPtr float_of(double value) { return holding(Kind::Float, &Object::real, value); }
  static ObjectPtr str_of(std::string value) { return holding(Kind::Str, &Object::text, std::move(value)); }
  static ObjectPtr bytes_of(std::string value) { return holding(Kind::Bytes, &Object::text, std::move(value)); }
  static ObjectPtr tensor_of(TensorView view) {
    return holding(Kind::Tensor, &Object::tensor, std::make_shared<const TensorView>(std::move(view)));
  }
};

/// "dict", "tensor", "torch._utils._rebuild_tensor_v2", ... for messages.
std::string describe(const Object& object);

/// The legacy torch storage class name of a dtype ("FloatStorage",
/// "ComplexDoubleStorage"); nullptr for the dtypes that PyTorch 2.x pickles as
/// an UntypedStorage with _rebuild_tensor_v3 (uint16/32/64, float8, complex32).
const char* storage_class_name(DType dtype) noexcept;

}  // namespace h5dcp::detail::pickle
