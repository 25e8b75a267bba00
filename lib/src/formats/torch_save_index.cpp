#include "formats/torch_save_index.hpp"

#include <algorithm>
#include <cstring>
#include <set>
#include <vector>

#include "base/key_escape.hpp"
#include "base/value_payload.hpp"
#include "h5dcp/error.hpp"
#include "plan/codec.hpp"

namespace h5dcp {
H5DCP_MESSAGE_FIELDS(detail::TorchStorageInfo, m.dtype, m.numel, m.data_offset, m.file);
H5DCP_MESSAGE_FIELDS(detail::TorchTensorInfo, m.storage, m.dtype, m.storage_offset, m.sizes, m.strides);
H5DCP_MESSAGE_FIELDS(detail::TorchValueInfo, m.encoding, m.payload);
H5DCP_MESSAGE_FIELDS(detail::TorchTensorChunk, m.box, m.view);
H5DCP_MESSAGE_FIELDS(detail::TorchChunkedTensor, m.dtype, m.size, m.chunks);
H5DCP_MESSAGE_FIELDS(detail::TorchSaveIndex, m.file_size, m.containers, m.storages, m.tensors, m.values, m.files,
                     m.file_sizes, m.chunked);
}  // namespace h5dcp

namespace h5dcp::detail {
namespace {

// hostile-input limit: What the index of a pickle may take: its keys (fqns), values and entries
// together at most kIndexFloorBytes + kIndexBytesPerPickleByte per byte of
// data.pkl. A pickle's memo lets one container be referred to from many
// places, and the index holds it once per path: a container shared along
// every level of a tree of dicts has 2**levels paths in a few hundred bytes
// ("billion laughs"). torch.save's own pickles share containers rarely (the
// same dict saved under two keys), and their fqns and values are shorter
// than the pickle bytes that name them.
constexpr std::uint64_t kIndexFloorBytes = std::uint64_t{64} << 20;
constexpr std::uint64_t kIndexBytesPerPickleByte = 64;
// What one entry of the index costs beyond its fqn and payload: its map node
// and the fields of a tensor, value or container.
constexpr std::uint64_t kIndexEntryBytes = 128;

class Indexer {
 public:
  Indexer(TorchSaveIndex& index, const std::string& what, std::uint64_t pickle_bytes)
      : index_(index),
        what_(what),
        budget_(kIndexFloorBytes + kIndexBytesPerPickleByte * pickle_bytes),
        pickle_bytes_(pickle_bytes) {}

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
    charge(fqn, kIndexEntryBytes + fqn.size() + (o.kind == Kind::Str || o.kind == Kind::Bytes ? o.text.size() : 0));
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
        const auto& v = *o.tensor;
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
      case Kind::Global:
      case Kind::Instance: break;
    }
    fail(fqn, "is " + pickle::describe(o) + ", which h5dcp cannot store" +
                  (o.unstorable_tensor ? " (it stores " + supported_dtype_names() + ")" : std::string()));
  }

 private:
  [[noreturn]] void fail(const std::string& fqn, const std::string& message) const {
    throw FormatError("h5dcp: in " + what_ + ", " +
                      (fqn.empty() ? std::string("the top-level dict") : "'" + fqn + "'") + " " + message);
  }

  // Counts an entry of the index against the budget (kIndexBytesPerPickleByte).
  void charge(const std::string& fqn, std::uint64_t bytes) {
    charged_ += bytes;
    if (charged_ > budget_)
      fail(fqn, "takes the state dict past " + std::to_string(budget_ >> 20) + " MiB of keys and values, for " +
                    std::to_string(pickle_bytes_) + " bytes of data.pkl (h5dcp allows " +
                    std::to_string(kIndexFloorBytes >> 20) + " MiB + " + std::to_string(kIndexBytesPerPickleByte) +
                    " bytes per byte): containers shared through the pickle's memo are reached along too many paths");
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
  std::uint64_t budget_;
  std::uint64_t pickle_bytes_;
  std::uint64_t charged_ = 0;
};

}  // namespace

void index_torch_object(const pickle::Object& object, const std::string& fqn, TorchSaveIndex& index,
                        const std::string& what, std::uint64_t pickle_bytes) {
  Indexer(index, what, pickle_bytes).visit(object, fqn);
}

TorchSaveIndex index_torch_save(const pickle::Object& root, const std::string& what, std::uint64_t pickle_bytes) {
  if (root.kind != pickle::Kind::Dict)
    throw FormatError("h5dcp: the object saved in " + what + " is " + pickle::describe(root) +
                      ", not a dict; h5dcp holds state dicts: re-save it as torch.save({\"name\": obj}, path)");
  TorchSaveIndex index;
  Indexer(index, what, pickle_bytes).dict_entries(root, "");
  return index;
}

std::vector<ChunkStorageMetadata> split_block(const Shape& sizes, std::int64_t element, std::int64_t max_bytes) {
  const auto n = sizes.size();
  if (volume(sizes) == 0) return {};
  if (n == 0 || volume(sizes) * element <= max_bytes) return {ChunkStorageMetadata{Shape(n, 0), sizes}};
  std::vector<std::int64_t> inner(n, element);  // bytes of one index of dimension d
  for (std::size_t d = n - 1; d > 0; --d) inner[d - 1] = inner[d] * sizes[d];
  std::size_t d = 0;
  while (inner[d] > max_bytes) ++d;  // inner[n - 1] is one element, which fits
  const auto step = std::max<std::int64_t>(1, max_bytes / inner[d]);
  std::vector<ChunkStorageMetadata> pieces;
  Shape outer(d, 0);  // an index over dimensions [0, d), like an odometer
  while (true) {
    for (std::int64_t start = 0; start < sizes[d]; start += step) {
      ChunkStorageMetadata box{Shape(n, 0), sizes};
      for (std::size_t k = 0; k < d; ++k) {
        box.offsets[k] = outer[k];
        box.sizes[k] = 1;
      }
      box.offsets[d] = start;
      box.sizes[d] = std::min(step, sizes[d] - start);
      pieces.push_back(std::move(box));
    }
    std::size_t k = d;
    while (k > 0 && ++outer[k - 1] == sizes[k - 1]) outer[--k] = 0;
    if (k == 0) break;
  }
  return pieces;
}

std::int64_t tensor_bytes(const TorchTensorInfo& tensor) {
  return volume(tensor.sizes) * static_cast<std::int64_t>(dtype_size(tensor.dtype));
}

Bytes encode(const TorchSaveIndex& index) { return encode_message(index); }

TorchSaveIndex decode_torch_save_index(std::string_view bytes) {
  auto index = ByteReader::decode<TorchSaveIndex>(bytes);
  if (index.file_sizes.size() != index.files.size()) throw Error("h5dcp: corrupt message (a torch.save index's files)");
  return index;
}

Metadata metadata_of(const TorchSaveIndex& index) {
  Metadata md;
  md.world_size = 1;
  for (const auto& [fqn, t] : index.tensors) {
    TensorStorageMetadata storage{{t.dtype}, t.sizes, {ChunkStorageMetadata{Shape(t.sizes.size(), 0), t.sizes}}};
    md.state_dict_metadata.emplace(fqn, std::move(storage));
  }
  for (const auto& [fqn, t] : index.chunked) {
    TensorStorageMetadata storage{{t.dtype}, t.size, {}};
    for (const auto& chunk : t.chunks) storage.chunks.push_back(chunk.box);
    md.state_dict_metadata.emplace(fqn, std::move(storage));
  }
  for (const auto& [fqn, v] : index.values)
    md.state_dict_metadata.emplace(fqn, BytesStorageMetadata{v.encoding, static_cast<std::int64_t>(v.payload.size())});
  md.containers = index.containers;
  return md;
}

}  // namespace h5dcp::detail
