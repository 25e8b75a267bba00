#include "torch/torch_save_index.hpp"

#include <cstring>
#include <set>
#include <vector>

#include "core/key_escape.hpp"
#include "core/value_payload.hpp"
#include "h5dcp/error.hpp"

namespace h5dcp::detail {
namespace {

class Indexer {
 public:
  Indexer(TorchSaveIndex& index, const std::string& what) : index_(index), what_(what) {}

  void dict_entries(const pickle::Object& dict, const std::string& fqn) {
    std::set<std::string> seen;
    for (const auto& [key, value] : dict.entries) {
      const auto text = key_text(*key, fqn);
      if (!seen.insert(text).second)
        fail(fqn, "has the key '" + text + "' twice (after turning int and bool keys into text)");
      visit(*value, child(fqn, text));
    }
  }

  void visit(const pickle::Object& o, const std::string& fqn) {
    using pickle::Kind;
    switch (o.kind) {
      case Kind::Dict:
        enter(o, fqn);
        index_.containers.emplace(fqn, ContainerKind::Dict);
        dict_entries(o, fqn);
        leave(o);
        return;
      case Kind::List:
      case Kind::Tuple:
        enter(o, fqn);
        index_.containers.emplace(fqn, ContainerKind::List);
        for (std::size_t i = 0; i < o.items.size(); ++i) visit(*o.items[i], child(fqn, std::to_string(i)));
        leave(o);
        return;
      case Kind::Tensor: {
        const auto& v = o.tensor;
        index_.tensors.emplace(fqn,
                               TorchTensorInfo{v.storage->key, v.storage->dtype, v.storage_offset, v.sizes, v.strides});
        index_.storages.emplace(v.storage->key, TorchStorageInfo{v.storage->dtype, v.storage->numel, 0});
        return;
      }
      case Kind::None: value(fqn, "none", {}); return;
      case Kind::Bool: value(fqn, "bool", bool_payload(o.boolean)); return;
      case Kind::Int: value(fqn, "int", raw_payload(o.integer)); return;
      case Kind::Float: value(fqn, "float", raw_payload(o.real)); return;
      case Kind::Str:
        if (o.text.find('\0') != std::string::npos)
          fail(fqn, "is a str holding a NUL character, which an h5dcp string cannot hold");
        value(fqn, "str", o.text);
        return;
      case Kind::Bytes: value(fqn, "bytes", o.text); return;
      case Kind::Storage:
      case Kind::Global: break;
    }
    fail(fqn, "is " + pickle::describe(o) + ", which h5dcp cannot store" +
                  (o.unstorable_tensor ? " (it stores " + supported_dtype_names() + ")" : std::string()));
  }

 private:
  [[noreturn]] void fail(const std::string& fqn, const std::string& message) const {
    throw FormatError("h5dcp: in " + what_ + ", " +
                      (fqn.empty() ? std::string("the top-level dict") : "'" + fqn + "'") + " " + message);
  }

  static std::string child(const std::string& parent, const std::string& key) {
    const auto name = escape_link_name(key);
    return parent.empty() ? name : parent + "/" + name;
  }

  std::string key_text(const pickle::Object& key, const std::string& fqn) const {
    switch (key.kind) {
      case pickle::Kind::Str: return key.text;
      case pickle::Kind::Int: return std::to_string(key.integer);  // e.g. optimizer state: {0: {...}}
      case pickle::Kind::Bool: return key.boolean ? "True" : "False";
      default: fail(fqn, "has a key that is " + pickle::describe(key) + "; keys must be str, int or bool");
    }
  }

  void value(const std::string& fqn, const char* encoding, std::string payload) {
    index_.values.emplace(fqn, TorchValueInfo{encoding, std::move(payload)});
  }

  // Pickles can refer to themselves (a list inside itself): refuse, or the walk never ends.
  void enter(const pickle::Object& o, const std::string& fqn) {
    if (!active_.insert(&o).second) fail(fqn, "contains itself");
  }
  void leave(const pickle::Object& o) { active_.erase(&o); }

  TorchSaveIndex& index_;
  const std::string& what_;
  std::set<const pickle::Object*> active_;
};

void put_shape(ByteWriter& w, const Shape& s) { w.put_ints(s); }

}  // namespace

TorchSaveIndex index_torch_save(const pickle::Object& root, const std::string& what) {
  if (root.kind != pickle::Kind::Dict)
    throw FormatError("h5dcp: the object saved in " + what + " is " + pickle::describe(root) +
                      ", not a dict; h5dcp holds state dicts: re-save it as torch.save({\"name\": obj}, path)");
  TorchSaveIndex index;
  Indexer(index, what).dict_entries(root, "");
  return index;
}

std::int64_t tensor_bytes(const TorchTensorInfo& tensor) {
  return volume(tensor.sizes) * static_cast<std::int64_t>(dtype_size(tensor.dtype));
}

Bytes encode(const TorchSaveIndex& index) {
  ByteWriter w;
  w.put<std::uint64_t>(index.file_size);
  w.put<std::uint64_t>(index.containers.size());
  for (const auto& [fqn, kind] : index.containers) {
    w.put_string(fqn);
    w.put(kind);
  }
  w.put<std::uint64_t>(index.storages.size());
  for (const auto& [key, s] : index.storages) {
    w.put_string(key);
    w.put(s.dtype);
    w.put(s.numel);
    w.put(s.data_offset);
    w.put<std::uint8_t>(s.stored ? 1 : 0);
  }
  w.put<std::uint64_t>(index.tensors.size());
  for (const auto& [fqn, t] : index.tensors) {
    w.put_string(fqn);
    w.put_string(t.storage);
    w.put(t.dtype);
    w.put(t.storage_offset);
    put_shape(w, t.sizes);
    put_shape(w, t.strides);
  }
  w.put<std::uint64_t>(index.values.size());
  for (const auto& [fqn, v] : index.values) {
    w.put_string(fqn);
    w.put_string(v.encoding);
    w.put_string(v.payload);
  }
  return w.take();
}

TorchSaveIndex decode_torch_save_index(std::string_view bytes) {
  ByteReader r(bytes);
  TorchSaveIndex index;
  index.file_size = r.get<std::uint64_t>();
  for (auto n = r.get<std::uint64_t>(); n > 0; --n) {
    auto fqn = r.get_string();
    index.containers.emplace(std::move(fqn), r.get<ContainerKind>());
  }
  for (auto n = r.get<std::uint64_t>(); n > 0; --n) {
    auto key = r.get_string();
    TorchStorageInfo s;
    s.dtype = r.get<DType>();
    s.numel = r.get<std::int64_t>();
    s.data_offset = r.get<std::uint64_t>();
    s.stored = r.get<std::uint8_t>() != 0;
    index.storages.emplace(std::move(key), s);
  }
  for (auto n = r.get<std::uint64_t>(); n > 0; --n) {
    auto fqn = r.get_string();
    TorchTensorInfo t;
    t.storage = r.get_string();
    t.dtype = r.get<DType>();
    t.storage_offset = r.get<std::int64_t>();
    t.sizes = r.get_ints();
    t.strides = r.get_ints();
    index.tensors.emplace(std::move(fqn), std::move(t));
  }
  for (auto n = r.get<std::uint64_t>(); n > 0; --n) {
    auto fqn = r.get_string();
    TorchValueInfo v;
    v.encoding = r.get_string();
    v.payload = r.get_string();
    index.values.emplace(std::move(fqn), std::move(v));
  }
  if (!r.done()) throw Error("h5dcp: corrupt message (trailing bytes after a torch.save index)");
  return index;
}

Metadata metadata_of(const TorchSaveIndex& index) {
  Metadata md;
  md.world_size = 1;
  for (const auto& [fqn, t] : index.tensors) {
    TensorStorageMetadata storage{{t.dtype}, t.sizes, {ChunkStorageMetadata{Shape(t.sizes.size(), 0), t.sizes}}};
    md.state_dict_metadata.emplace(fqn, std::move(storage));
  }
  for (const auto& [fqn, v] : index.values)
    md.state_dict_metadata.emplace(fqn, BytesStorageMetadata{v.encoding, static_cast<std::int64_t>(v.payload.size())});
  md.containers = index.containers;
  return md;
}

}  // namespace h5dcp::detail
