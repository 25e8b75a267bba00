#include "common.hpp"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <iostream>

namespace h5dcp::cli {

const char* const kExitCodeHelp =
    "Exit codes:\n"
    "  0  success; verify: no problem found; diff: the files are equal\n"
    "  1  verify: problems found; diff: the files differ\n"
    "  2  usage error (unknown option, missing argument, DST exists without --force)\n"
    "  3  an input is missing, unreadable or of an unsupported format, or the output cannot be written";

void same_on_every_rank(const Context& context, const std::function<void()>& check) {
  if (!context.mpi || context.size == 1) return check();
  // Rank 0's verdict: "" (accepted) or its message ("DST: ...").
  std::string verdict;
  if (context.rank == 0) {
    try {
      check();
    } catch (const CLI::ValidationError& e) {
      verdict = e.what();
    }
  }
  int size = static_cast<int>(verdict.size());
  MPI_Bcast(&size, 1, MPI_INT, 0, MPI_COMM_WORLD);
  verdict.resize(static_cast<std::size_t>(size));
  MPI_Bcast(verdict.data(), size, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (verdict.empty()) return;
  throw CLI::ValidationError(verdict);
}

std::string_view without_prefix(const std::string& message) {
  return message.rfind("h5dcp: ", 0) == 0 ? std::string_view(message).substr(7) : std::string_view(message);
}

void print_error(const std::string& command, const std::string& message) {
  // Library messages start with "h5dcp: "; the prefix here says that already.
  std::cerr << "h5dcp " << command << ": error: " << without_prefix(message) << std::endl;
}

std::string human_bytes(std::int64_t bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < std::size(units)) {
    value /= 1024.0;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.1f %s", value, units[unit]);
  return text;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t d = 0; d < shape.size(); ++d) out += (d ? ", " : "") + std::to_string(shape[d]);
  return out + "]";
}

std::string float_text(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char text[64];
  const auto result = std::to_chars(text, text + sizeof text, value);
  std::string out(text, result.ptr);
  // Like Python: a float always looks like one.
  if (out.find_first_of(".en") == std::string::npos) out += ".0";
  return out;
}

std::string dtype_text(const at::Tensor& tensor) {
  switch (tensor.scalar_type()) {
    case at::kDouble: return "float64";
    case at::kFloat: return "float32";
    case at::kHalf: return "float16";
    case at::kBFloat16: return "bfloat16";
    case at::kLong: return "int64";
    case at::kInt: return "int32";
    case at::kShort: return "int16";
    case at::kChar: return "int8";
    case at::kByte: return "uint8";
    case at::kBool: return "bool";
    case at::kUInt16: return "uint16";
    case at::kUInt32: return "uint32";
    case at::kUInt64: return "uint64";
    case at::kFloat8_e4m3fn: return "float8_e4m3fn";
    case at::kFloat8_e5m2: return "float8_e5m2";
    case at::kFloat8_e4m3fnuz: return "float8_e4m3fnuz";
    case at::kFloat8_e5m2fnuz: return "float8_e5m2fnuz";
    case at::kFloat8_e8m0fnu: return "float8_e8m0fnu";
    case at::kComplexHalf: return "complex32";
    case at::kComplexFloat: return "complex64";
    case at::kComplexDouble: return "complex128";
    default: return c10::toString(tensor.scalar_type());
  }
}

std::string sharding_text(const TensorStorageMetadata& tensor) {
  const auto& size = tensor.size;
  if (size.empty()) return "scalar";
  if (tensor.chunks.size() <= 1) return "whole";
  // Along one dimension when every chunk spans all of the others.
  int along = -1;
  bool one_dim = true;
  for (std::size_t d = 0; d < size.size() && one_dim; ++d) {
    const bool split = std::any_of(tensor.chunks.begin(), tensor.chunks.end(),
                                   [&](const ChunkStorageMetadata& c) { return c.sizes[d] != size[d]; });
    if (!split) continue;
    if (along >= 0) one_dim = false;
    along = static_cast<int>(d);
  }
  const auto n = std::to_string(tensor.chunks.size());
  if (one_dim && along >= 0) return n + " shards along dim " + std::to_string(along);
  return n + " blocks";
}

namespace {

std::string hex(const std::string& bytes, std::size_t limit) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < std::min(bytes.size(), limit); ++i) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  if (bytes.size() > limit) out += "...";
  return out;
}

std::string quoted_text(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string value_text(const StateValue& value) {
  if (std::holds_alternative<std::monostate>(value)) return "None";
  if (const auto* v = std::get_if<std::int64_t>(&value)) return std::to_string(*v);
  if (const auto* v = std::get_if<double>(&value)) return float_text(*v);
  if (const auto* v = std::get_if<bool>(&value)) return *v ? "True" : "False";
  if (const auto* v = std::get_if<std::string>(&value)) return quoted_text(*v);
  if (const auto* v = std::get_if<ByteString>(&value))
    return "bytes[" + std::to_string(v->data.size()) + "] " + hex(v->data, 32);
  if (const auto* v = std::get_if<PickledObject>(&value)) return "pickle[" + std::to_string(v->data.size()) + "]";
  return "?";
}

std::string value_kind(const StateValue& value) {
  if (std::holds_alternative<std::monostate>(value)) return "none";
  if (std::holds_alternative<std::int64_t>(value)) return "int";
  if (std::holds_alternative<double>(value)) return "float";
  if (std::holds_alternative<bool>(value)) return "bool";
  if (std::holds_alternative<std::string>(value)) return "str";
  if (std::holds_alternative<ByteString>(value)) return "bytes";
  if (std::holds_alternative<PickledObject>(value)) return "pickle";
  if (std::holds_alternative<at::Tensor>(value)) return "tensor";
  if (std::holds_alternative<StateDict>(value)) return "dict";
  if (std::holds_alternative<StateList>(value)) return "list";
  return "object";
}

ProgressLine::ProgressLine(bool enabled, std::string label) : enabled_(enabled), label_(std::move(label)) {}

ProgressLine::~ProgressLine() { finish(); }

void ProgressLine::update(const Progress& p) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  const bool last = p.items_total > 0 && p.items_done == p.items_total;
  if (shown_ && !last && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  std::string line = label_ + ": " + std::to_string(p.items_done);
  if (p.items_total > 0) line += "/" + std::to_string(p.items_total);
  line += " tensors, " + human_bytes(p.bytes_done);
  if (p.bytes_total > 0) {
    line += " of " + human_bytes(p.bytes_total);
    line += " (" + std::to_string(p.bytes_done * 100 / p.bytes_total) + "%)";
  }
  std::cerr << "\r\033[K" << line << std::flush;
  shown_ = true;
}

ProgressCallback ProgressLine::callback() {
  if (!enabled_) return {};
  return [this](const Progress& p) { update(p); };
}

void ProgressLine::finish() {
  if (enabled_ && shown_) std::cerr << "\r\033[K" << std::flush;
  shown_ = false;
}

std::string local_copy_text(const LocalCopySummary& copy) {
  const auto owner = static_cast<std::size_t>(copy.owner_rank);
  const auto node = owner < copy.rank_node.size() && static_cast<std::size_t>(copy.rank_node[owner]) < copy.nodes.size()
                        ? copy.nodes[static_cast<std::size_t>(copy.rank_node[owner])]
                        : std::string("?");
  return "node-local copy of run " + copy.run_id + ", step " + std::to_string(copy.step) + ": the blocks of rank " +
         std::to_string(copy.owner_rank) + " of " + std::to_string(copy.rank_node.size()) + " (node " + node + "), " +
         (copy.replica == 0 ? std::string("its own node's copy") : "replica " + std::to_string(copy.replica)) +
         "; it holds " + std::to_string(copy.chunks_held) + " of the step's " + std::to_string(copy.chunks_total) +
         " chunks (the other ranks' blocks are not in this file) and every value";
}

}  // namespace h5dcp::cli
