// h5dcp diff A B [--rtol R] [--atol A]: compares two checkpoints (or
// torch.save files, or one of each) key by key: keys only in one, kinds,
// dtypes and shapes that differ, and for tensors the elements that differ
// with the largest absolute and relative differences. Tensors are read in
// blocks of rows from checkpoints, so memory stays bounded.
//
// Elements are equal when |a - b| <= atol + rtol * |b| (numpy.isclose;
// NaN equals NaN); integers and bools compare exactly. Exit 0 when equal.

#include <ATen/ATen.h>

#include <iostream>
#include <map>
#include <memory>
#include <set>

#include "common.hpp"
#include "h5dcp/checkpoint_reader.hpp"
#include "h5dcp/file_kind.hpp"
#include "h5dcp/torch_save.hpp"

namespace h5dcp::cli {
namespace {

constexpr std::int64_t kBlockBytes = std::int64_t{32} << 20;  // doubles compared at once, per side

struct Entry {
  enum class Kind { Dict, List, Tensor, Value } kind = Kind::Value;
  std::string dtype;
  std::vector<std::int64_t> shape;
};

// One side of the comparison.
class Side {
 public:
  virtual ~Side() = default;
  const std::map<std::string, Entry>& entries() const { return entries_; }
  /// Rows [start, start + count) of the tensor at `fqn` (0-d: the scalar).
  virtual at::Tensor rows(const std::string& fqn, std::int64_t start, std::int64_t count) = 0;
  virtual StateValue value(const std::string& fqn) = 0;

 protected:
  std::map<std::string, Entry> entries_;
};

class CheckpointSide final : public Side {
 public:
  explicit CheckpointSide(const std::string& path) : reader_(path) {
    const auto& md = reader_.metadata();
    for (const auto& [fqn, kind] : md.containers)
      entries_[fqn].kind = kind == ContainerKind::Dict ? Entry::Kind::Dict : Entry::Kind::List;
    for (const auto& [fqn, storage] : md.state_dict_metadata) {
      auto& e = entries_[fqn];
      if (const auto* t = std::get_if<TensorStorageMetadata>(&storage)) {
        e.kind = Entry::Kind::Tensor;
        e.dtype = std::string(dtype_name(t->properties.dtype));
        e.shape = t->size;
      }
    }
  }
  at::Tensor rows(const std::string& fqn, std::int64_t start, std::int64_t count) override {
    const auto& shape = entries_.at(fqn).shape;
    ChunkStorageMetadata box{std::vector<std::int64_t>(shape.size(), 0), shape};
    if (!shape.empty()) {
      box.offsets[0] = start;
      box.sizes[0] = count;
    }
    return reader_.read_block(fqn, box);
  }
  StateValue value(const std::string& fqn) override { return reader_.value(fqn); }

 private:
  CheckpointReader reader_;
};

// A torch.save file is read whole (its format has no partial reads).
class TorchSaveSide final : public Side {
 public:
  explicit TorchSaveSide(const std::string& path) : flat_(flatten_state_dict(read_torch_save(path))) {
    for (const auto& [fqn, kind] : flat_.containers)
      entries_[fqn].kind = kind == ContainerKind::Dict ? Entry::Kind::Dict : Entry::Kind::List;
    for (const auto& [fqn, value] : flat_.leaves) {
      auto& e = entries_[fqn];
      if (const auto* t = std::get_if<at::Tensor>(&value)) {
        e.kind = Entry::Kind::Tensor;
        e.dtype = dtype_text(*t);
        e.shape = t->sizes().vec();
      }
    }
  }
  at::Tensor rows(const std::string& fqn, std::int64_t start, std::int64_t count) override {
    const auto& t = std::get<at::Tensor>(flat_.leaves.at(fqn));
    return t.dim() == 0 ? t : t.narrow(0, start, count);
  }
  StateValue value(const std::string& fqn) override { return flat_.leaves.at(fqn); }

 private:
  FlatStateDict flat_;
};

std::unique_ptr<Side> open_side(const std::string& path) {
  switch (detect_file_kind(path)) {
    case FileKind::H5dcpCheckpoint:
    case FileKind::Hdf5: return std::make_unique<CheckpointSide>(path);
    case FileKind::TorchSave:
    case FileKind::LegacyTorchSave: return std::make_unique<TorchSaveSide>(path);
    case FileKind::Safetensors:
      throw std::runtime_error("'" + path +
                               "' is a safetensors file: diff compares h5dcp checkpoints and torch.save files; "
                               "convert it first (h5dcp convert " +
                               path + " OUT.h5)");
    case FileKind::Other: break;
  }
  throw std::runtime_error("'" + path + "' is neither an h5dcp checkpoint nor a torch.save file");
}

std::string describe(const Entry& e, Side& side, const std::string& fqn) {
  switch (e.kind) {
    case Entry::Kind::Dict: return "dict";
    case Entry::Kind::List: return "list";
    case Entry::Kind::Tensor: return "tensor " + e.dtype + " " + shape_text(e.shape);
    case Entry::Kind::Value: {
      const auto v = side.value(fqn);
      return value_kind(v) + " " + value_text(v);
    }
  }
  return "?";
}

struct Tolerance {
  double rtol = 0.0;
  double atol = 0.0;
};

struct TensorDiff {
  std::int64_t elements = 0;
  std::int64_t differing = 0;
  double max_abs = 0.0;
  std::int64_t max_abs_at = -1;  // flat index
  double max_rel = 0.0;
};

// PyTorch 2.x's dtypes with few CPU kernels, widened exactly to one that has
// them: uint16/32 to int64, the float8 variants to float32 (every float8
// value, e8m0's 2^-127 included, is a float32), complex32 to complex64.
// uint64 stays (compared by its bits, its differences in float64).
at::Tensor widened(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kUInt16:
    case at::kUInt32: return t.to(at::kLong);
    case at::kFloat8_e4m3fn:
    case at::kFloat8_e5m2:
    case at::kFloat8_e4m3fnuz:
    case at::kFloat8_e5m2fnuz:
    case at::kFloat8_e8m0fnu: return t.to(at::kFloat);
    case at::kComplexHalf: return t.to(at::kComplexFloat);
    default: return t;
  }
}

TensorDiff compare_tensor(Side& a, Side& b, const std::string& fqn, const std::vector<std::int64_t>& shape,
                          const Tolerance& tol) {
  TensorDiff out;
  std::int64_t volume = 1;
  for (const auto s : shape) volume *= s;
  out.elements = volume;
  if (volume == 0) return out;
  const std::int64_t rows = shape.empty() ? 1 : shape[0];
  const std::int64_t per_row = volume / rows;
  const std::int64_t step = std::max<std::int64_t>(1, kBlockBytes / 8 / per_row);
  for (std::int64_t start = 0; start < rows; start += step) {
    const auto n = std::min(step, rows - start);
    const auto x = widened(a.rows(fqn, start, n).reshape({-1}));
    const auto y = widened(b.rows(fqn, start, n).reshape({-1}));
    // Equal blocks (the common case) need none of the passes below; NaNs make
    // at::equal false and take the full path.
    if (at::equal(x, y)) continue;
    const bool complex = x.is_complex();
    // Exact, in the stored dtype (int64 and uint64 beyond 2**53 included).
    auto equal = x.scalar_type() == at::kUInt64 ? at::eq(x.view(at::kLong), y.view(at::kLong)) : at::eq(x, y);
    if (at::isFloatingType(x.scalar_type()) || complex)
      equal = equal.logical_or(at::isnan(x).logical_and(at::isnan(y)));
    // Complex values differ by the modulus of their difference (as numpy's isclose).
    const auto y_abs = complex ? y.abs().to(at::kDouble) : y.to(at::kDouble).abs();
    const auto difference = complex ? (x - y).abs().to(at::kDouble) : (x.to(at::kDouble) - y.to(at::kDouble)).abs();
    auto d = at::where(equal, at::zeros_like(difference), difference);
    const auto close = equal.logical_or(d <= tol.atol + tol.rtol * y_abs);
    out.differing += (close.logical_not()).sum().item<std::int64_t>();
    d = at::nan_to_num(d, 0.0);  // a NaN against a number counts above, not in the maxima
    const auto i = d.argmax().item<std::int64_t>();
    const auto m = d[i].item<double>();
    if (m > out.max_abs) {
      out.max_abs = m;
      out.max_abs_at = start * per_row + i;
    }
    const auto rel = at::where(equal, at::zeros_like(d), d / y_abs);
    out.max_rel = std::max(out.max_rel, at::nan_to_num(rel, 0.0, INFINITY).max().item<double>());
  }
  return out;
}

std::string index_text(std::int64_t flat, const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> idx(shape.size(), 0);
  for (std::size_t d = shape.size(); d-- > 0;) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return shape_text(idx);
}

bool values_equal(const StateValue& x, const StateValue& y, const Tolerance& tol) {
  if (value_kind(x) != value_kind(y)) return false;
  if (const auto* a = std::get_if<double>(&x)) {
    const double b = std::get<double>(y);
    if (std::isnan(*a) || std::isnan(b)) return std::isnan(*a) && std::isnan(b);
    return *a == b || std::abs(*a - b) <= tol.atol + tol.rtol * std::abs(b);
  }
  if (const auto* a = std::get_if<ByteString>(&x)) return *a == std::get<ByteString>(y);
  if (const auto* a = std::get_if<PickledObject>(&x)) return *a == std::get<PickledObject>(y);
  return value_text(x) == value_text(y);
}

int run_diff(const std::string& path_a, const std::string& path_b, const Tolerance& tol, const Context& context) {
  auto a = open_side(path_a);
  auto b = open_side(path_b);
  std::set<std::string> keys;
  for (const auto& [fqn, e] : a->entries()) keys.insert(fqn);
  for (const auto& [fqn, e] : b->entries()) keys.insert(fqn);
  std::vector<std::string> lines;
  std::int64_t differing_keys = 0;
  std::int64_t tensors = 0;
  Progress progress;
  ProgressLine line(context.progress, "diff");
  for (const auto& [fqn, e] : a->entries())
    if (e.kind == Entry::Kind::Tensor) progress.items_total += 1;
  for (const auto& fqn : keys) {
    const auto ia = a->entries().find(fqn);
    const auto ib = b->entries().find(fqn);
    std::vector<std::string> found;
    if (ib == b->entries().end()) {
      found.push_back("- " + fqn + ": only in A (" + describe(ia->second, *a, fqn) + ")");
    } else if (ia == a->entries().end()) {
      found.push_back("+ " + fqn + ": only in B (" + describe(ib->second, *b, fqn) + ")");
    } else if (ia->second.kind != ib->second.kind) {
      found.push_back("~ " + fqn + ": " + describe(ia->second, *a, fqn) + " in A, " + describe(ib->second, *b, fqn) +
                      " in B");
    } else if (ia->second.kind == Entry::Kind::Tensor) {
      const auto& ea = ia->second;
      const auto& eb = ib->second;
      if (ea.dtype != eb.dtype) found.push_back("~ " + fqn + ": dtype " + ea.dtype + " in A, " + eb.dtype + " in B");
      if (ea.shape != eb.shape)
        found.push_back("~ " + fqn + ": shape " + shape_text(ea.shape) + " in A, " + shape_text(eb.shape) + " in B");
      if (found.empty()) {
        const auto d = compare_tensor(*a, *b, fqn, ea.shape, tol);
        if (d.differing > 0) {
          std::string text = "~ " + fqn + ": " + std::to_string(d.differing) + " of " + std::to_string(d.elements) +
                             " elements differ";
          if (d.max_abs_at >= 0)
            text += "; max abs diff " + float_text(d.max_abs) + " at " + index_text(d.max_abs_at, ea.shape) +
                    "; max rel diff " + float_text(d.max_rel);
          found.push_back(text);
        }
        ++tensors;
        progress.items_done += 1;
        progress.current = fqn;
        line.update(progress);
      }
    } else if (ia->second.kind == Entry::Kind::Value) {
      const auto x = a->value(fqn);
      const auto y = b->value(fqn);
      if (!values_equal(x, y, tol)) {
        const bool same_kind = value_kind(x) == value_kind(y);
        found.push_back("~ " + fqn + ": " + (same_kind ? "" : value_kind(x) + " ") + value_text(x) + " in A, " +
                        (same_kind ? "" : value_kind(y) + " ") + value_text(y) + " in B");
      }
    }
    if (!found.empty()) ++differing_keys;
    lines.insert(lines.end(), found.begin(), found.end());
  }
  line.finish();
  std::cout << "A: " << path_a << "\nB: " << path_b << "\n";
  for (const auto& l : lines) std::cout << l << "\n";
  const std::string tolerance = "atol " + float_text(tol.atol) + ", rtol " + float_text(tol.rtol);
  if (differing_keys == 0) {
    std::cout << "equal: " << keys.size() << " keys, " << tensors << " tensors compared (" << tolerance << ")\n";
    return kOk;
  }
  std::cout << "different: " << differing_keys << " of " << keys.size() << " keys differ (" << tolerance << ")\n";
  return kFound;
}

}  // namespace

Command add_diff(CLI::App& parent) {
  auto* app = parent.add_subcommand(
      "diff", "Compare two checkpoints (or torch.save files) key by key: keys, kinds, dtypes, shapes, values.");
  struct Args {
    std::string a;
    std::string b;
    Tolerance tol;
  };
  auto args = std::make_shared<Args>();
  app->add_option("A", args->a, "the first checkpoint or torch.save file")->required();
  app->add_option("B", args->b, "the second one")->required();
  app->add_option("--rtol", args->tol.rtol, "relative tolerance: |a - b| <= atol + rtol * |b| is equal (default 0)")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--atol", args->tol.atol, "absolute tolerance (default 0: floats must be equal, NaN equals NaN)")
      ->check(CLI::NonNegativeNumber);
  app->footer(kExitCodeHelp);
  Command command;
  command.app = app;
  command.run = [args](const Context& context) { return run_diff(args->a, args->b, args->tol, context); };
  return command;
}

}  // namespace h5dcp::cli
