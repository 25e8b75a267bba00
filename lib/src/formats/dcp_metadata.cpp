#include "formats/dcp_metadata.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "base/key_escape.hpp"
#include "base/utf8.hpp"
#include "formats/pickle_reader.hpp"
#include "formats/pickle_writer.hpp"
#include "h5dcp/error.hpp"
#include "plan/chunk_geometry.hpp"

namespace h5dcp::detail {
namespace {

using pickle::Kind;
using pickle::Object;
using pickle::ObjectPtr;

constexpr const char* kMetadataModule = "torch.distributed.checkpoint.metadata";
constexpr const char* kFilesystemModule = "torch.distributed.checkpoint.filesystem";

// hostile-input limit: dimensions of a tensor, as the torch.save reader allows.
constexpr std::size_t kMaxDims = 64;

class MetadataReader {
 public:
  explicit MetadataReader(const std::string& what) : what_(what) {}

  DcpMetadata read(const Object& root) {
    require_instance(root, "Metadata", "the pickled object");
    DcpMetadata md;
    if (const auto* version = attribute(root, "version"); version != nullptr && version->kind != Kind::None) {
      if (version->kind != Kind::Str) fail("its version is " + pickle::describe(*version));
      md.version = version->text;
    }
    if (md.version != kDcpMetadataVersion)
      fail(md.version.empty() ? std::string("it names no metadata version")
                              : "its metadata version is '" + md.version + "'",
           std::string(", and h5dcp reads version ") + kDcpMetadataVersion +
               " (PyTorch 2.13's torch.distributed.checkpoint; checked with 2.13.0)");
    const auto locations = storage_data(required(root, "storage_data"));
    const auto& entries = required(root, "state_dict_metadata");
    if (entries.kind != Kind::Dict) fail("its state_dict_metadata is " + pickle::describe(entries));
    for (const auto& [key, value] : entries.entries) {
      const auto fqn = text_of(*key, "a state_dict_metadata key");
      if (value->kind == Kind::Instance && value->name == "BytesStorageMetadata") {
        md.values.emplace(fqn, item_of(locations, fqn, std::nullopt));
        continue;
      }
      require_instance(*value, "TensorStorageMetadata", "'" + fqn + "'");
      md.tensors.emplace(fqn, tensor(*value, fqn, locations));
    }
    if (const auto* paths = attribute(root, "planner_data"); paths != nullptr && paths->kind != Kind::None) {
      if (paths->kind != Kind::Dict) fail("its planner_data is " + pickle::describe(*paths));
      for (const auto& [key, value] : paths->entries) {
        const auto fqn = text_of(*key, "a planner_data key");
        if (md.tensors.count(fqn) == 0 && md.values.count(fqn) == 0) continue;  // a planner's own data
        md.paths.emplace(fqn, path_of(*value, fqn));
      }
    }
    require_disjoint_items(md);
    return md;
  }

 private:
  using Locations = std::map<std::pair<std::string, std::optional<Shape>>, DcpItem>;

  [[noreturn]] void fail(const std::string& message, const std::string& more = {}) const {
    throw FormatError("h5dcp: the DCP metadata " + what_ + " cannot be read: " + message + more);
  }

  static const Object* attribute(const Object& o, const char* name) {
    for (const auto& [key, value] : o.entries)
      if (key->kind == Kind::Str && key->text == name) return value.get();
    return nullptr;
  }
  const Object& required(const Object& o, const char* name) const {
    const auto* value = attribute(o, name);
    if (value == nullptr) fail(pickle::describe(o) + " has no " + name);
    return *value;
  }
  void require_instance(const Object& o, const char* name, const std::string& where) const {
    const bool filesystem = std::string(name) == "_StorageInfo";
    if (o.kind != Kind::Instance || o.name != name || o.text != (filesystem ? kFilesystemModule : kMetadataModule))
      fail(where + " is " + pickle::describe(o) + ", not a " + name);
  }
  // A str of the pickle, checked to be text (a Python str is UTF-8 in a
  // pickle; keys and file names are written back and become HDF5 names).
  std::string text_of(const Object& o, const std::string& where) const {
    if (o.kind != Kind::Str) fail(where + " is " + pickle::describe(o) + ", not a str");
    if (!is_valid_utf8(o.text) || o.text.find('\0') != std::string::npos)
      fail(where + " '" + printable_key(o.text) + "' is not UTF-8 text without NUL");
    return o.text;
  }
  std::int64_t count_of(const Object& o, const std::string& where) const {
    if (o.kind != Kind::Int || o.integer < 0) fail(where + " is not a non-negative int");
    return o.integer;
  }
  Shape shape_of(const Object& o, const std::string& where) const {
    if (o.kind != Kind::Tuple && o.kind != Kind::List) fail(where + " is " + pickle::describe(o) + ", not a size");
    if (o.items.size() > kMaxDims) fail(where + " has more than " + std::to_string(kMaxDims) + " dimensions");
    Shape shape;
    for (const auto& item : o.items) shape.push_back(count_of(*item, where));
    return shape;
  }

  [[noreturn]] void not_in_directory(const std::string& fqn, const std::string& path) const {
    std::string message = "the data file of '" + fqn + "' is '";
    message += path;
    message += "', not the name of a file in the checkpoint directory (h5dcp reads no other)";
    fail(message);
  }

  // storage_data: MetadataIndex(fqn, offset) -> _StorageInfo(relative_path, offset, length).
  Locations storage_data(const Object& data) const {
    if (data.kind != Kind::Dict) fail("its storage_data is " + pickle::describe(data));
    Locations out;
    for (const auto& [key, value] : data.entries) {
      require_instance(*key, "MetadataIndex", "a storage_data key");
      const auto fqn = text_of(required(*key, "fqn"), "a MetadataIndex's fqn");
      std::optional<Shape> offset;
      if (const auto* o = attribute(*key, "offset"); o != nullptr && o->kind != Kind::None)
        offset = shape_of(*o, "the offset of '" + fqn + "'");
      require_instance(*value, "_StorageInfo", "the storage of '" + fqn + "'");
      DcpItem item;
      item.relative_path = text_of(required(*value, "relative_path"), "the data file of '" + fqn + "'");
      const auto& path = item.relative_path;
      if (path.empty() || path == "." || path == ".." || path.find('/') != std::string::npos ||
          path.find('\0') != std::string::npos)
        not_in_directory(fqn, path);
      item.offset = static_cast<std::uint64_t>(count_of(required(*value, "offset"), "the offset of '" + fqn + "'"));
      item.length = static_cast<std::uint64_t>(count_of(required(*value, "length"), "the length of '" + fqn + "'"));
      if (const auto* t = attribute(*value, "transform_descriptors");
          t != nullptr && t->kind != Kind::None && !t->items.empty())
        fail("'" + fqn +
             "' is stored transformed (compressed or otherwise extended by a StorageWriter "
             "extension); h5dcp reads items stored as torch.save archives only");
      if (!out.emplace(std::make_pair(fqn, offset), item).second) fail("'" + fqn + "' is stored twice");
    }
    return out;
  }

  DcpItem item_of(const Locations& locations, const std::string& fqn, const std::optional<Shape>& offset) const {
    const auto it = locations.find({fqn, offset});
    if (it == locations.end())
      fail("'" + fqn + "'" + (offset ? " has a chunk at " + describe_shape(*offset) : std::string()) +
           " that storage_data does not locate");
    return it->second;
  }

  DcpTensor tensor(const Object& o, const std::string& fqn, const Locations& locations) const {
    DcpTensor t;
    const auto& properties = required(o, "properties");
    require_instance(properties, "TensorProperties", "the properties of '" + fqn + "'");
    // TensorProperties pickles (dtype, layout, requires_grad, memory format, pin_memory).
    if (properties.items.size() < 2) fail("the properties of '" + fqn + "' are not (dtype, layout, ...)");
    const auto& dtype = *properties.items[0];
    const auto known = dtype.kind == Kind::Global && dtype.text == "torch" ? dtype_from_name(dtype.name) : std::nullopt;
    if (!known) fail("'" + fqn + "' has the dtype " + pickle::describe(dtype) + ", which h5dcp does not store");
    t.dtype = *known;
    const auto& layout = *properties.items[1];
    if (layout.kind != Kind::Str || layout.text != "torch.strided")
      fail("'" + fqn + "' has the layout " + (layout.kind == Kind::Str ? layout.text : pickle::describe(layout)) +
           "; h5dcp stores dense (strided) tensors");
    t.size = shape_of(required(o, "size"), "the size of '" + fqn + "'");
    if (!checked_bytes(t.size, static_cast<std::int64_t>(dtype_size(t.dtype))))
      fail("'" + fqn + "' of size " + describe_shape(t.size) + " has more bytes than a 64-bit size counts");
    const auto& chunks = required(o, "chunks");
    if (chunks.kind != Kind::List) fail("the chunks of '" + fqn + "' are " + pickle::describe(chunks));
    std::vector<ChunkStorageMetadata> boxes;
    for (const auto& chunk : chunks.items) {
      require_instance(*chunk, "ChunkStorageMetadata", "a chunk of '" + fqn + "'");
      ChunkStorageMetadata box{shape_of(required(*chunk, "offsets"), "a chunk's offsets of '" + fqn + "'"),
                               shape_of(required(*chunk, "sizes"), "a chunk's sizes of '" + fqn + "'")};
      if (box.offsets.size() != t.size.size() || box.sizes.size() != t.size.size())
        fail("a chunk of '" + fqn + "' has other dimensions than its tensor " + describe_shape(t.size));
      for (std::size_t d = 0; d < t.size.size(); ++d)
        if (box.offsets[d] > t.size[d] || box.sizes[d] > t.size[d] - box.offsets[d])
          fail("the chunk " + describe_box(box) + " of '" + fqn + "' lies outside its size " + describe_shape(t.size));
      boxes.push_back(box);
      t.chunks.push_back({box, item_of(locations, fqn, box.offsets)});
    }
    std::vector<ChunkStorageMetadata> filled;
    std::copy_if(boxes.begin(), boxes.end(), std::back_inserter(filled),
                 [](const ChunkStorageMetadata& b) { return volume(b.sizes) > 0; });
    if (volume(t.size) > 0)
      if (auto problem = tiling_problem(fqn, t.size, filled)) fail(*problem);
    return t;
  }

  std::vector<DcpPathStep> path_of(const Object& o, const std::string& fqn) const {
    if ((o.kind != Kind::Tuple && o.kind != Kind::List) || o.items.empty())
      fail("the path of '" + fqn + "' in planner_data is " + pickle::describe(o));
    // Refused before its fqn is built: the reader refuses such nesting, and a
    // deep path would index depth x length bytes of containers.
    if (o.items.size() > kMaxContainerDepth)
      fail("the path of '" + fqn + "' in planner_data nests " + std::to_string(o.items.size()) +
           " keys deep; h5dcp reads checkpoints nested less than " + std::to_string(kMaxContainerDepth) + " deep");
    std::vector<DcpPathStep> path;
    for (const auto& step : o.items) {
      if (step->kind == Kind::Str)
        path.push_back({false, text_of(*step, "a key in the path of '" + fqn + "'"), 0});
      else if (step->kind == Kind::Int && step->integer >= 0)
        path.push_back({true, {}, step->integer});
      else
        fail("the path of '" + fqn + "' in planner_data holds " + pickle::describe(*step));
    }
    return path;
  }

  // Every byte of a data file belongs to one item at most (a rule on
  // hostile inputs, not a limit with a value). Two keys at one byte range would be one archive read as two
  // things, and its pickle parsed once per key: thousands of chunks naming
  // one item multiply the work of a small file. With items disjoint (and,
  // checked when the files are opened, inside their files), the pickles
  // parsed in a conversion add up to at most the data files' bytes, each
  // within the pickle reader's per-byte budget.
  void require_disjoint_items(const DcpMetadata& md) const {
    struct Placed {
      const DcpItem* item;
      std::string name;
    };
    std::map<std::string, std::vector<Placed>> by_file;
    for (const auto& [fqn, t] : md.tensors)
      for (const auto& chunk : t.chunks)
        by_file[chunk.item.relative_path].push_back(
            {&chunk.item, "the chunk " + describe_box(chunk.box) + " of '" + fqn + "'"});
    for (const auto& [fqn, item] : md.values) by_file[item.relative_path].push_back({&item, "'" + fqn + "'"});
    auto end = [](const Placed& p) { return p.item->offset + p.item->length; };  // both < 2**63
    auto range = [&](const Placed& p) {
      return p.name + " (bytes [" + std::to_string(p.item->offset) + ", " + std::to_string(end(p)) + "))";
    };
    for (auto& [file, items] : by_file) {
      std::sort(items.begin(), items.end(),
                [](const Placed& a, const Placed& b) { return a.item->offset < b.item->offset; });
      const Placed* reach = nullptr;  // of the items before, the one that ends last
      for (const auto& p : items) {
        if (p.item->length == 0) continue;
        if (reach != nullptr && end(*reach) > p.item->offset)
          fail(range(*reach) + " and " + range(p) + " overlap in the data file '" + file +
               "'; each byte of a data file belongs to one item");
        if (reach == nullptr || end(p) > end(*reach)) reach = &p;
      }
    }
  }

  const std::string& what_;
};

// --- writing ------------------------------------------------------------------

ObjectPtr str(std::string text) { return Object::str_of(std::move(text)); }
ObjectPtr integer(std::int64_t value) { return Object::int_of(value); }

// module.name: a global, with `args` a call of it (the pickler writes REDUCE).
ObjectPtr call(const char* module, std::string name, std::vector<ObjectPtr> args) {
  auto o = Object::of(Kind::Global);
  o->text = module;
  o->name = std::move(name);
  o->items = std::move(args);
  return o;
}

ObjectPtr size_of(const Shape& shape) {
  auto tuple = Object::of(Kind::Tuple);
  for (const auto v : shape) tuple->items.push_back(integer(v));
  return call("torch", "Size", {tuple});
}

ObjectPtr instance(const char* module, const char* name, const std::vector<std::pair<const char*, ObjectPtr>>& fields) {
  auto o = Object::of(Kind::Instance);
  o->text = module;
  o->name = name;
  for (const auto& [key, value] : fields) o->entries.emplace_back(str(key), value);
  return o;
}

ObjectPtr properties_of(DType dtype) {
  auto o = instance(kMetadataModule, "TensorProperties", {});
  o->items = {call("torch", std::string(dtype_name(dtype)), {}),
              call("torch.serialization", "_get_layout", {str("torch.strided")}), Object::boolean_of(false),
              call(kMetadataModule, "_MEM_FORMAT_ENCODING", {integer(0)}), Object::boolean_of(false)};
  return o;
}

// An entry of storage_data: MetadataIndex(fqn, offset) -> _StorageInfo(relative_path, offset, length).
std::pair<ObjectPtr, ObjectPtr> storage_entry(const std::string& fqn, ObjectPtr offset, const DcpItem& item) {
  return {instance(kMetadataModule, "MetadataIndex",
                   {{"fqn", str(fqn)}, {"offset", std::move(offset)}, {"index", Object::none()}}),
          instance(kFilesystemModule, "_StorageInfo",
                   {{"relative_path", str(item.relative_path)},
                    {"offset", integer(static_cast<std::int64_t>(item.offset))},
                    {"length", integer(static_cast<std::int64_t>(item.length))}})};
}

}  // namespace

DcpMetadata read_dcp_metadata(std::string_view pickle, const std::string& what) {
  const auto root = pickle::unpickle(pickle, what, nullptr, pickle::PicklesOf::DcpMetadata);
  return MetadataReader(what).read(*root);
}

std::string write_dcp_metadata(const DcpMetadata& metadata) {
  auto entries = Object::of(Kind::Dict);
  auto storage = Object::of(Kind::Dict);
  for (const auto& [fqn, t] : metadata.tensors) {
    auto chunks = Object::of(Kind::List);
    for (const auto& chunk : t.chunks) {
      chunks->items.push_back(instance(kMetadataModule, "ChunkStorageMetadata",
                                       {{"offsets", size_of(chunk.box.offsets)}, {"sizes", size_of(chunk.box.sizes)}}));
      storage->entries.push_back(storage_entry(fqn, size_of(chunk.box.offsets), chunk.item));
    }
    entries->entries.emplace_back(
        str(fqn), instance(kMetadataModule, "TensorStorageMetadata",
                           {{"properties", properties_of(t.dtype)}, {"size", size_of(t.size)}, {"chunks", chunks}}));
  }
  for (const auto& [fqn, item] : metadata.values) {
    entries->entries.emplace_back(str(fqn), instance(kMetadataModule, "BytesStorageMetadata", {}));
    storage->entries.push_back(storage_entry(fqn, Object::none(), item));
  }
  auto paths = Object::of(Kind::Dict);
  for (const auto& [fqn, path] : metadata.paths) {
    auto tuple = Object::of(Kind::Tuple);
    for (const auto& step : path) tuple->items.push_back(step.is_index ? integer(step.index) : str(step.key));
    paths->entries.emplace_back(str(fqn), tuple);
  }
  const auto root = instance(kMetadataModule, "Metadata",
                             {{"state_dict_metadata", entries},
                              {"planner_data", paths},
                              {"storage_data", storage},
                              {"storage_meta", Object::none()},
                              {"version", str(kDcpMetadataVersion)}});
  return pickle::pickle(*root);
}

}  // namespace h5dcp::detail
