#include "formats/safetensors_header.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "base/key_escape.hpp"
#include "h5dcp/error.hpp"
#include "storage/file_descriptor.hpp"

namespace h5dcp::detail {
namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

struct DTypeName {
  DType dtype;
  std::string_view name;
};

// As safetensors 0.8 names them; complex32 and complex128 have no name.
constexpr std::array<DTypeName, 19> kNames{{
    {DType::Float64, "F64"},
    {DType::Float32, "F32"},
    {DType::Float16, "F16"},
    {DType::BFloat16, "BF16"},
    {DType::Int64, "I64"},
    {DType::Int32, "I32"},
    {DType::Int16, "I16"},
    {DType::Int8, "I8"},
    {DType::UInt8, "U8"},
    {DType::Bool, "BOOL"},
    {DType::UInt16, "U16"},
    {DType::UInt32, "U32"},
    {DType::UInt64, "U64"},
    {DType::Float8_e4m3fn, "F8_E4M3"},
    {DType::Float8_e5m2, "F8_E5M2"},
    {DType::Float8_e4m3fnuz, "F8_E4M3FNUZ"},
    {DType::Float8_e5m2fnuz, "F8_E5M2FNUZ"},
    {DType::Float8_e8m0fnu, "F8_E8M0"},
    {DType::Complex64, "C64"},
}};

[[noreturn]] void bad(const std::string& what, const std::string& why) {
  throw FormatError("h5dcp: '" + what + "' is not a valid safetensors file: " + why);
}

std::string shown(std::string_view name) { return "'" + printable_key(name) + "'"; }

std::uint64_t unsigned_of(const Json& j, const std::string& what, const std::string& where) {
  if (!j.is_number_unsigned()) bad(what, where + " is not a non-negative integer");
  return j.get<std::uint64_t>();
}

// nlohmann::json keeps one value of a key that an object holds twice, and
// says nothing: a header or index whose key appears twice means two things,
// so it is refused, at every level of objects. `duplicate` throws.
template <typename Duplicate>
Json parse_unique_keys(std::string_view text, Duplicate&& duplicate) {
  std::vector<std::set<std::string>> keys;  // of each object being parsed, the innermost last
  const Json::parser_callback_t check = [&](int /*depth*/, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::object_start) keys.emplace_back();
    if (event == Json::parse_event_t::object_end) keys.pop_back();
    if (event == Json::parse_event_t::key && !keys.back().insert(parsed.get_ref<const std::string&>()).second)
      duplicate(parsed.get_ref<const std::string&>());
    return true;
  };
  return Json::parse(text.begin(), text.end(), check, /*allow_exceptions=*/false);
}

SafetensorsTensor tensor_of(const std::string& name, const Json& entry, std::uint64_t data_bytes,
                            const std::string& what) {
  const auto where = "tensor " + shown(name);
  if (!entry.is_object()) bad(what, where + " is not an object");
  const auto dtype = entry.find("dtype");
  const auto shape = entry.find("shape");
  const auto offsets = entry.find("data_offsets");
  if (dtype == entry.end() || shape == entry.end() || offsets == entry.end())
    bad(what, where + " lacks dtype, shape or data_offsets");
  if (!dtype->is_string()) bad(what, where + " has a dtype that is not a string");
  SafetensorsTensor t;
  t.name = name;
  const auto found = dtype_from_safetensors(dtype->get_ref<const std::string&>());
  if (!found) bad(what, where + " has unknown dtype " + shown(dtype->get_ref<const std::string&>()));
  t.dtype = *found;
  if (!shape->is_array() || shape->size() > 64) bad(what, where + " has a malformed shape");
  for (const auto& s : *shape) {
    const auto n = unsigned_of(s, what, where + "'s shape");
    if (n > static_cast<std::uint64_t>(INT64_MAX)) bad(what, where + " has a dimension too large");
    t.shape.push_back(static_cast<std::int64_t>(n));
  }
  if (!offsets->is_array() || offsets->size() != 2) bad(what, where + " has malformed data_offsets");
  t.begin = unsigned_of((*offsets)[0], what, where + "'s data_offsets");
  t.end = unsigned_of((*offsets)[1], what, where + "'s data_offsets");
  if (t.begin > t.end || t.end > data_bytes)
    bad(what, where + " lies about its offsets: [" + std::to_string(t.begin) + ", " + std::to_string(t.end) +
                  ") is not inside the " + std::to_string(data_bytes) + " bytes of data");
  const auto bytes = checked_bytes(t.shape, static_cast<std::int64_t>(dtype_size(t.dtype)));
  if (!bytes || static_cast<std::uint64_t>(*bytes) != t.end - t.begin)
    bad(what, where + " of shape " + describe_shape(t.shape) + " and dtype " + dtype->get_ref<const std::string&>() +
                  " does not have " + std::to_string(t.end - t.begin) + " bytes");
  return t;
}

}  // namespace

std::optional<std::string_view> safetensors_dtype_name(DType dtype) noexcept {
  for (const auto& n : kNames)
    if (n.dtype == dtype) return n.name;
  return std::nullopt;
}

std::optional<DType> dtype_from_safetensors(std::string_view name) noexcept {
  for (const auto& n : kNames)
    if (n.name == name) return n.dtype;
  return std::nullopt;
}

SafetensorsHeader parse_safetensors_header(std::string_view json, std::uint64_t data_bytes, const std::string& what) {
  const auto root = parse_unique_keys(json, [&](const std::string& key) {
    bad(what, "its header holds the key " + shown(key) + " twice in one object (one name, one meaning)");
  });
  if (root.is_discarded()) bad(what, "its header is not JSON");
  if (!root.is_object()) bad(what, "its header is not a JSON object");
  SafetensorsHeader header;
  for (const auto& [name, entry] : root.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) bad(what, "__metadata__ is not an object");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) bad(what, "__metadata__ " + shown(key) + " is not a string");
        header.metadata.emplace(key, value.get<std::string>());
      }
      continue;
    }
    header.tensors.push_back(tensor_of(name, entry, data_bytes, what));
  }
  // The ranges must tile the data exactly: sorted by begin, each starts where
  // the previous ended, the last ends at the end of the file.
  std::sort(header.tensors.begin(), header.tensors.end(),
            [](const auto& a, const auto& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  std::uint64_t at = 0;
  for (const auto& t : header.tensors) {
    if (t.begin != at)
      bad(what, "tensor " + shown(t.name) + " lies about its offsets: it starts at " + std::to_string(t.begin) +
                    (t.begin < at ? ", inside the bytes of another tensor (overlapping ranges)"
                                  : ", leaving a gap after byte " + std::to_string(at)));
    at = t.end;
  }
  if (at != data_bytes)
    bad(what, "its tensors end at byte " + std::to_string(at) + " of " + std::to_string(data_bytes) +
                  " bytes of data (the header lies about its length, or the file is truncated)");
  return header;
}

SafetensorsHeader read_safetensors_header(const std::string& path) {
  const auto fd = open_input_file(path, "a safetensors file");
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) throw IoError("h5dcp: reading '" + path + "' failed: " + std::strerror(errno));
  const auto size = static_cast<std::uint64_t>(info.st_size);
  auto read_at = [&](void* out, std::size_t n, std::uint64_t offset) {
    auto* p = static_cast<char*>(out);
    while (n > 0) {
      const auto got = ::pread(fd.get(), p, n, static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) throw IoError("h5dcp: reading '" + path + "' failed: " + std::strerror(errno));
      if (got == 0) bad(path, "it ends inside its header");
      p += got;
      n -= static_cast<std::size_t>(got);
      offset += static_cast<std::uint64_t>(got);
    }
  };
  if (size < 8) bad(path, "it is shorter than the 8 bytes of its header size");
  unsigned char raw[8];
  read_at(raw, 8, 0);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | raw[i];
  if (n > kMaxSafetensorsHeader)
    bad(path, "its header size " + std::to_string(n) + " exceeds the limit of " +
                  std::to_string(kMaxSafetensorsHeader) + " bytes");
  if (n > size - 8)
    bad(path, "its header size " + std::to_string(n) + " is larger than the file (" + std::to_string(size) +
                  " bytes): it lies about its length, or the file is truncated");
  std::string json(n, '\0');
  read_at(json.data(), n, 8);
  auto header = parse_safetensors_header(json, size - 8 - n, path);
  header.data_start = 8 + n;
  header.file_size = size;
  return header;
}

std::string compose_safetensors_header(const std::vector<SafetensorsTensor>& tensors,
                                       const std::map<std::string, std::string>& metadata) {
  OrderedJson root = OrderedJson::object();
  if (!metadata.empty()) {
    OrderedJson md = OrderedJson::object();
    for (const auto& [k, v] : metadata) md[k] = v;
    root["__metadata__"] = std::move(md);
  }
  for (const auto& t : tensors) {
    OrderedJson entry = OrderedJson::object();
    entry["dtype"] = std::string(*safetensors_dtype_name(t.dtype));
    entry["shape"] = t.shape;
    entry["data_offsets"] = {t.begin, t.end};
    root[t.name] = std::move(entry);
  }
  auto json = root.dump();
  json.append((8 - (json.size() % 8)) % 8, ' ');
  std::string out(8, '\0');
  auto n = static_cast<std::uint64_t>(json.size());
  for (int i = 0; i < 8; ++i, n >>= 8) out[static_cast<std::size_t>(i)] = static_cast<char>(n & 0xFF);
  return out + json;
}

std::map<std::string, std::string> parse_safetensors_index(std::string_view json, const std::string& what) {
  auto refuse = [&](const std::string& why) {
    throw FormatError("h5dcp: '" + what + "' is not a valid safetensors index: " + why);
  };
  const auto root = parse_unique_keys(json, [&](const std::string& key) {
    refuse("it holds the key " + shown(key) + " twice in one object (one name, one meaning)");
  });
  if (root.is_discarded() || !root.is_object()) refuse("it is not a JSON object");
  const auto map = root.find("weight_map");
  if (map == root.end() || !map->is_object()) refuse("it has no weight_map object");
  std::map<std::string, std::string> out;
  for (const auto& [name, file] : map->items()) {
    if (!file.is_string()) refuse("the file of tensor " + shown(name) + " is not a string");
    const auto& f = file.get_ref<const std::string&>();
    if (f.empty() || f == "." || f == ".." || f.find('/') != std::string::npos || f.find('\0') != std::string::npos)
      refuse("tensor " + shown(name) + " names the file " + shown(f) +
             ", which is not a plain file name in the index's directory");
    out.emplace(name, f);
  }
  return out;
}

std::string compose_safetensors_index(const std::map<std::string, std::string>& weight_map, std::uint64_t total_size) {
  OrderedJson root = OrderedJson::object();
  root["metadata"] = OrderedJson{{"total_size", total_size}};
  OrderedJson map = OrderedJson::object();
  for (const auto& [name, file] : weight_map) map[name] = file;
  root["weight_map"] = std::move(map);
  return root.dump(2) + "\n";
}

}  // namespace h5dcp::detail
