// h5dcp inspect FILE [--json]: the tree of a checkpoint, every tensor with
// its dtype, global shape, bytes and how it was sharded when saved, every
// non-tensor value, and the file's format, writer, world size and time.

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <optional>

#include "common.hpp"
#include "h5dcp/checkpoint_reader.hpp"
#include "h5dcp/file_kind.hpp"
#include "h5dcp/verify.hpp"

namespace h5dcp::cli {
namespace {

// The --json schema's name and version: bumped when a field changes meaning
// or disappears (new fields may be added within a version).
constexpr const char* kSchema = "h5dcp-inspect/1";
constexpr std::size_t kMaxJsonBytes = 1024;  // longer bytes values are summarized

struct Node {
  std::string key;  // the dict key or list position, unescaped
  std::string fqn;
  std::optional<ContainerKind> container;    // set for dicts and lists (and the root)
  const StorageMetadata* storage = nullptr;  // set for leaves
  std::vector<Node> children;
};

std::string parent_of(const std::string& fqn) {
  const auto slash = fqn.rfind('/');
  return slash == std::string::npos ? std::string() : fqn.substr(0, slash);
}

Node tree_of(const Metadata& md) {
  std::map<std::string, std::vector<std::string>> children;
  for (const auto& [fqn, kind] : md.containers) children[parent_of(fqn)].push_back(fqn);
  for (const auto& [fqn, storage] : md.state_dict_metadata) children[parent_of(fqn)].push_back(fqn);
  std::function<void(Node&)> fill = [&](Node& node) {
    for (const auto& fqn : children[node.fqn]) {
      Node child;
      child.fqn = fqn;
      child.key = path_of(fqn).back();
      if (const auto it = md.containers.find(fqn); it != md.containers.end()) {
        child.container = it->second;
        fill(child);
      } else {
        child.storage = &md.state_dict_metadata.at(fqn);
      }
      node.children.push_back(std::move(child));
    }
    // List elements by position ("2" before "10"), dict entries by key.
    const bool list = node.container == ContainerKind::List;
    const auto position = [](const std::string& key) {
      const bool digits = !key.empty() && key.size() < 19 && std::all_of(key.begin(), key.end(), ::isdigit);
      return digits ? std::stoll(key) : std::numeric_limits<long long>::max();
    };
    std::sort(node.children.begin(), node.children.end(), [&](const Node& a, const Node& b) {
      if (list && position(a.key) != position(b.key)) return position(a.key) < position(b.key);
      return a.key < b.key;
    });
  };
  Node root;
  root.container = ContainerKind::Dict;
  fill(root);
  return root;
}

std::int64_t tensor_bytes(const TensorStorageMetadata& t) {
  std::int64_t n = 1;
  for (const auto s : t.size) n *= s;
  return n * static_cast<std::int64_t>(dtype_size(t.properties.dtype));
}

struct Totals {
  std::int64_t tensors = 0;
  std::int64_t tensor_bytes = 0;
  std::int64_t values = 0;
  std::int64_t containers = 0;
};

Totals totals_of(const Metadata& md) {
  Totals t;
  t.containers = static_cast<std::int64_t>(md.containers.size());
  for (const auto& [fqn, storage] : md.state_dict_metadata) {
    if (const auto* tensor = std::get_if<TensorStorageMetadata>(&storage)) {
      t.tensors += 1;
      t.tensor_bytes += tensor_bytes(*tensor);
    } else {
      t.values += 1;
    }
  }
  return t;
}

// --- text ----------------------------------------------------------------------

struct Row {
  std::string name;
  std::string type;
  std::string shape;  // tensors: shape; values: the value
  std::string size;
  std::string sharding;
  bool tensor = false;
};

// Keys that would read ambiguously in the tree are quoted.
std::string key_text(const std::string& key) {
  const bool plain = !key.empty() && key.front() != ' ' && key.back() != ' ' && key.find('/') == std::string::npos &&
                     std::none_of(key.begin(), key.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; });
  return plain ? key : nlohmann::json(key).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void rows_of(const Node& node, int depth, CheckpointReader& reader, std::vector<Row>& rows) {
  for (const auto& child : node.children) {
    Row row;
    row.name = std::string(static_cast<std::size_t>(depth) * 2, ' ') + key_text(child.key);
    if (child.container) {
      row.name += "/";
      row.type = *child.container == ContainerKind::Dict ? "dict" : "list";
      if (child.children.empty()) row.shape = "(empty)";
    } else if (const auto* t = std::get_if<TensorStorageMetadata>(child.storage)) {
      row.tensor = true;
      row.type = std::string(dtype_name(t->properties.dtype));
      row.shape = shape_text(t->size);
      row.size = human_bytes(tensor_bytes(*t));
      row.sharding = sharding_text(*t);
    } else {
      const auto value = reader.value(child.fqn);
      row.type = value_kind(value);
      row.shape = value_text(value);
    }
    rows.push_back(std::move(row));
    if (child.container) rows_of(child, depth + 1, reader, rows);
  }
}

void print_text(const std::string& path, CheckpointReader& reader) {
  const auto& md = reader.metadata();
  const auto totals = totals_of(md);
  std::cout << path << ": h5dcp checkpoint, format " << md.format_version_major << "." << md.format_version_minor
            << ", written by h5dcp " << md.library_version << " on " << md.world_size
            << (md.world_size == 1 ? " rank" : " ranks") << " at " << md.created << "\n"
            << totals.tensors << " tensors (" << human_bytes(totals.tensor_bytes) << "), " << totals.values
            << " values, " << totals.containers << " containers\n";
  if (const auto copy = read_local_copy_summary(path)) std::cout << local_copy_text(*copy) << "\n";
  std::vector<Row> rows;
  rows_of(tree_of(md), 0, reader, rows);
  if (rows.empty()) return;
  std::size_t name_w = 0, type_w = 0, shape_w = 0, size_w = 0;
  for (const auto& r : rows) {
    name_w = std::max(name_w, r.name.size());
    type_w = std::max(type_w, r.type.size());
    if (r.tensor) {
      shape_w = std::max(shape_w, r.shape.size());
      size_w = std::max(size_w, r.size.size());
    }
  }
  std::cout << "\n";
  for (const auto& r : rows) {
    std::string line = r.name + std::string(name_w - r.name.size() + 2, ' ') + r.type;
    if (r.tensor) {
      line += std::string(type_w - r.type.size() + 2, ' ') + r.shape + std::string(shape_w - r.shape.size() + 2, ' ') +
              std::string(size_w - r.size.size(), ' ') + r.size + "  " + r.sharding;
    } else if (!r.shape.empty()) {
      line += std::string(type_w - r.type.size() + 2, ' ') + r.shape;
    }
    std::cout << line << "\n";
  }
}

// --- json ----------------------------------------------------------------------

nlohmann::json value_json(const StateValue& value) {
  if (const auto* v = std::get_if<std::int64_t>(&value)) return *v;
  if (const auto* v = std::get_if<double>(&value))
    return std::isfinite(*v) ? nlohmann::json(*v) : nlohmann::json(float_text(*v));
  if (const auto* v = std::get_if<bool>(&value)) return *v;
  if (const auto* v = std::get_if<std::string>(&value)) return *v;
  if (const auto* v = std::get_if<ByteString>(&value)) {
    if (v->data.size() > kMaxJsonBytes) return nullptr;
    static const char digits[] = "0123456789abcdef";
    std::string hex;
    for (const char c : v->data) {
      hex += digits[static_cast<unsigned char>(c) >> 4];
      hex += digits[static_cast<unsigned char>(c) & 15];
    }
    return hex;
  }
  return nullptr;  // None, and pickled objects (opaque here)
}

nlohmann::json node_json(const Node& node, CheckpointReader& reader) {
  nlohmann::json out;
  if (node.container == ContainerKind::Dict) {
    out["type"] = "dict";
    out["entries"] = nlohmann::json::object();
    for (const auto& c : node.children) out["entries"][c.key] = node_json(c, reader);
  } else if (node.container == ContainerKind::List) {
    out["type"] = "list";
    out["items"] = nlohmann::json::array();
    for (const auto& c : node.children) out["items"].push_back(node_json(c, reader));
  } else if (const auto* t = std::get_if<TensorStorageMetadata>(node.storage)) {
    out["type"] = "tensor";
    out["dtype"] = std::string(dtype_name(t->properties.dtype));
    out["shape"] = t->size;
    out["bytes"] = tensor_bytes(*t);
    out["sharding"] = sharding_text(*t);
    out["chunks"] = nlohmann::json::array();
    if (!t->size.empty())
      for (const auto& c : t->chunks) out["chunks"].push_back({{"offsets", c.offsets}, {"sizes", c.sizes}});
  } else {
    const auto& v = std::get<BytesStorageMetadata>(*node.storage);
    out["type"] = "value";
    out["encoding"] = v.encoding;
    out["bytes"] = v.size;
    out["value"] = value_json(reader.value(node.fqn));
  }
  return out;
}

void print_json(const std::string& path, CheckpointReader& reader) {
  const auto& md = reader.metadata();
  const auto totals = totals_of(md);
  nlohmann::json out;
  out["schema"] = kSchema;
  out["file"] = path;
  out["format_version"] = {md.format_version_major, md.format_version_minor};
  out["library_version"] = md.library_version;
  out["world_size"] = md.world_size;
  out["created"] = md.created;
  out["totals"] = {{"tensors", totals.tensors},
                   {"tensor_bytes", totals.tensor_bytes},
                   {"values", totals.values},
                   {"containers", totals.containers}};
  if (const auto copy = read_local_copy_summary(path))
    out["local_copy"] = {{"run_id", copy->run_id},
                         {"step", copy->step},
                         {"owner_rank", copy->owner_rank},
                         {"replica", copy->replica},
                         {"nodes", copy->nodes},
                         {"rank_node", copy->rank_node},
                         {"chunks_held", copy->chunks_held},
                         {"chunks_total", copy->chunks_total}};
  out["root"] = node_json(tree_of(md), reader);
  std::cout << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

}  // namespace

Command add_inspect(CLI::App& parent) {
  auto* app = parent.add_subcommand("inspect", "Show a checkpoint's tree, tensors, values and metadata.");
  auto file = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  app->add_option("FILE", *file, "the checkpoint")->required();
  app->add_flag("--json", *json,
                "machine-readable output: one JSON object, schema \"" + std::string(kSchema) +
                    "\" (see README: keys sorted, sizes in bytes, non-finite floats as \"nan\"/\"inf\"/\"-inf\")");
  app->footer(kExitCodeHelp);
  Command command;
  command.app = app;
  command.run = [file, json](const Context&) {
    const auto kind = detect_file_kind(*file);
    if (kind != FileKind::H5dcpCheckpoint && kind != FileKind::Hdf5) {
      print_error("inspect", "'" + *file + "' is a " + std::string(describe(kind)) + ", not an h5dcp checkpoint" +
                                 (kind == FileKind::TorchSave ? " (h5dcp convert turns it into one)" : ""));
      return kFailure;
    }
    CheckpointReader reader(*file);
    if (*json)
      print_json(*file, reader);
    else
      print_text(*file, reader);
    return kOk;
  };
  return command;
}

}  // namespace h5dcp::cli
