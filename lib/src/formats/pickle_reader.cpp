#include "formats/pickle_reader.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

#include "h5dcp/error.hpp"

namespace h5dcp::detail::pickle {
namespace {

// The opcodes this reader knows (pickletools' names).
enum Op : std::uint8_t {
  kMark = '(',
  kStop = '.',
  kPop = '0',
  kPopMark = '1',
  kDup = '2',
  kFloat = 'F',
  kInt = 'I',
  kBinInt = 'J',
  kBinInt1 = 'K',
  kLong = 'L',
  kBinInt2 = 'M',
  kNone = 'N',
  kBinPersId = 'Q',
  kReduce = 'R',
  kBinUnicode = 'X',
  kAppend = 'a',
  kBuild = 'b',
  kGlobal = 'c',
  kDict = 'd',
  kEmptyDict = '}',
  kAppends = 'e',
  kGet = 'g',
  kBinGet = 'h',
  kLongBinGet = 'j',
  kList = 'l',
  kEmptyList = ']',
  kPut = 'p',
  kBinPut = 'q',
  kLongBinPut = 'r',
  kSetItem = 's',
  kTuple = 't',
  kEmptyTuple = ')',
  kSetItems = 'u',
  kBinFloat = 'G',
  kBinBytes = 'B',
  kShortBinBytes = 'C',
  kProto = 0x80,
  kTuple1 = 0x85,
  kTuple2 = 0x86,
  kTuple3 = 0x87,
  kNewTrue = 0x88,
  kNewFalse = 0x89,
  kNewObj = 0x81,
  kLong1 = 0x8a,
  kLong4 = 0x8b,
  kShortBinUnicode = 0x8c,
  kBinUnicode8 = 0x8d,
  kBinBytes8 = 0x8e,
  kStackGlobal = 0x93,
  kMemoize = 0x94,
  kFrame = 0x95,
};

// The dtype of the legacy storage class torch.<name> ("FloatStorage"), the
// inverse of storage_class_name; nullopt for any other name.
std::optional<DType> legacy_storage_dtype(const std::string& name) {
  for (int d = 0; d <= static_cast<int>(kLastDType); ++d) {
    const char* storage_class = storage_class_name(static_cast<DType>(d));
    if (storage_class != nullptr && name == storage_class) return static_cast<DType>(d);
  }
  return std::nullopt;
}

std::string supported() {
  return "h5dcp converts dicts, lists, tuples, str, bytes, int, float, bool, None and dense tensors of dtype " +
         supported_dtype_names();
}

bool is_builtins(const std::string& module) { return module == "builtins" || module == "__builtin__"; }

// DCP's .metadata: the classes NEWOBJ may make, and the globals it may name
// (classes, the callables below, torch dtypes). Checked against PyTorch 2.13's
// torch.distributed.checkpoint (metadata version 1.0.0).
constexpr const char* kDcpMetadataModule = "torch.distributed.checkpoint.metadata";
constexpr const char* kDcpMetadataClasses[] = {"Metadata",
                                               "TensorStorageMetadata",
                                               "TensorProperties",
                                               "ChunkStorageMetadata",
                                               "BytesStorageMetadata",
                                               "MetadataIndex",
                                               "StorageMeta"};
constexpr const char* kPathClasses[] = {"PosixPath", "PurePosixPath", "WindowsPath", "PureWindowsPath", "Path"};

bool is_dcp_class(const std::string& module, const std::string& name) {
  if (module == "torch.distributed.checkpoint.filesystem") return name == "_StorageInfo";
  if (module != kDcpMetadataModule) return false;
  return std::any_of(std::begin(kDcpMetadataClasses), std::end(kDcpMetadataClasses),
                     [&](const char* c) { return name == c; });
}

bool is_dcp_global(const std::string& module, const std::string& name) {
  if (is_dcp_class(module, name)) return true;
  if (module == kDcpMetadataModule) return name == "_MEM_FORMAT_ENCODING";
  if (module == "torch") return name == "Size" || dtype_from_name(name).has_value();
  if (module == "torch.serialization") return name == "_get_layout";
  if (module == "collections") return name == "OrderedDict";
  if (module == "pathlib")
    return std::any_of(std::begin(kPathClasses), std::end(kPathClasses), [&](const char* c) { return name == c; });
  return false;
}

// hostile-input limit: Deeper nesting of lists, tuples and dicts is refused: state dicts nest a
// few levels, and walks over the objects (and their destructors) recurse.
constexpr std::size_t kMaxDepth = 1000;
// hostile-input limit: MARKs open at once: each opens a container being built (a dict's items, a
// tensor's arguments), so legitimate pickles nest them about as deep as
// their containers.
constexpr std::size_t kMaxOpenMarks = kMaxDepth;
// hostile-input limit: Objects on the stack at once. Python's pickler batches APPENDS and
// SETITEMS by 1,000 items, so torch.save's pickles hold a few thousand; a
// stream of pushes that are never consumed is refused here (and each push
// takes at least one input byte, so the stack is also bounded by the input).
constexpr std::size_t kMaxStackObjects = std::size_t{1} << 22;
// hostile-input limit: Bytes of one tensor's elements: 1 TiB, above any single tensor a torch.save
// file holds (it is saved from memory), and what a view that repeats its
// storage (stride 0) may claim: converting it writes that many bytes.
constexpr std::int64_t kMaxTensorBytes = std::int64_t{1} << 40;
// hostile-input limit: Dimensions of a tensor: PyTorch's own kernels stop at 25 and HDF5 at 32.
constexpr std::size_t kMaxTensorDims = 64;
// hostile-input limit: The reader's memory budget: every object, string and tensor view it makes
// is counted (cumulatively, so the work done is bounded too), and a pickle
// that needs more than kMemoryFloorBytes + kMemoryPerInputByte per byte of
// data.pkl is refused. h5dcp-written state-dict pickles need about 21 bytes per byte
// (tests/torch_save: PickleMemoryPerOpcodeIsBounded); a pickle that copies a memoized
// string or size tuple thousands of times, or makes an object of every byte,
// is what reaches it.
constexpr std::uint64_t kMemoryFloorBytes = std::uint64_t{64} << 20;
constexpr std::uint64_t kMemoryPerInputByte = 128;
// What one object costs: the object and its shared_ptr control block.
constexpr std::uint64_t kObjectBytes = sizeof(Object) + 16;

// a * b, or nullopt when it does not fit in int64 (both non-negative).
std::optional<std::int64_t> product(std::int64_t a, std::int64_t b) {
  std::int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

class Unpickler {
 public:
  Unpickler(std::string_view data, const std::string& what, PicklesOf kind)
      : data_(data), what_(what), kind_(kind), budget_(kMemoryFloorBytes + kMemoryPerInputByte * data.size()) {}

  // Through the memo a pickle can put a list inside itself, and a few bytes
  // per level nest objects deep enough to overflow the stack of recursive
  // walks and destructors. Every container made is held here until the end:
  // a pickle whose containers hold themselves or nest deeper than kMaxDepth
  // is refused, and after any failure dismantle() empties every container,
  // so that no cycle leaks and no destructor recurses deep.
  void check_containers() {
    std::unordered_map<const Object*, std::size_t> depth;  // 0: on the current path
    struct Frame {
      const Object* object;
      std::size_t next = 0;
      std::size_t below = 0;  // the deepest child's depth
    };
    std::vector<Frame> path;
    for (const auto& root : containers_) {
      if (depth.count(root.get()) != 0) continue;
      path.push_back({root.get()});
      depth[root.get()] = 0;
      while (!path.empty()) {
        auto& frame = path.back();
        const Object* child = child_of(*frame.object, frame.next++);
        if (child == nullptr) {
          const auto d = frame.below + 1;
          if (d > kMaxDepth) fail("objects nest deeper than " + std::to_string(kMaxDepth) + " levels");
          depth[frame.object] = d;
          path.pop_back();
          if (!path.empty()) path.back().below = std::max(path.back().below, d);
          continue;
        }
        if (child->items.empty() && child->entries.empty()) continue;  // a leaf, or an empty container
        const auto it = depth.find(child);
        if (it == depth.end()) {
          depth[child] = 0;
          path.push_back({child});
          if (path.size() > kMaxDepth) fail("objects nest deeper than " + std::to_string(kMaxDepth) + " levels");
        } else if (it->second == 0) {
          fail(describe(*child) + " contains itself");
        } else {
          frame.below = std::max(frame.below, it->second);
        }
      }
    }
  }

  UnpickleStats stats() const { return {charged_, budget_}; }

  void dismantle() noexcept {
    for (auto& c : containers_) {
      c->items.clear();
      c->entries.clear();
    }
  }

  ObjectPtr run() {
    while (true) {
      op_pos_ = pos_;
      const std::uint8_t op = byte();
      if (op == kStop) {
        auto result = pop();
        if (!stack_.empty() || !marks_.empty()) fail("objects are left on the stack at STOP");
        return result;
      }
      step(op);
    }
  }

 private:
  [[noreturn]] void fail(const std::string& message) const {
    const char* pickle =
        kind_ == PicklesOf::DcpMetadata ? "the DCP metadata pickle " : "the torch.save pickle (data.pkl) of ";
    throw FormatError("h5dcp: " + std::string(pickle) + what_ + " cannot be read: " + message + " (at byte " +
                      std::to_string(op_pos_) + ")");
  }

  // Counts `bytes` of memory against the budget (see kMemoryPerInputByte).
  void charge(std::uint64_t bytes) {
    charged_ += bytes;
    if (charged_ > budget_)
      fail("it needs more than " + std::to_string(budget_ >> 20) + " MiB of memory to read, for " +
           std::to_string(data_.size()) + " bytes (h5dcp allows " + std::to_string(kMemoryFloorBytes >> 20) +
           " MiB + " + std::to_string(kMemoryPerInputByte) + " bytes per byte of data.pkl)");
  }
  ObjectPtr make(Kind kind) {
    charge(kObjectBytes);
    return Object::of(kind);
  }
  ObjectPtr make_text(Kind kind, std::string text) {
    charge(kObjectBytes + text.size());
    auto o = Object::of(kind);
    o->text = std::move(text);
    return o;
  }
  // The `n` bytes that follow, as a str or bytes (the BINUNICODE and BINBYTES opcodes).
  ObjectPtr counted_text(Kind kind, std::size_t n) { return make_text(kind, std::string(take(n), n)); }
  ObjectPtr make_int(std::int64_t value) {
    // Small ints are shared: they are most of a tensor's arguments, and
    // nothing changes an int once made.
    if (value >= 0 && value < static_cast<std::int64_t>(small_ints_.size())) {
      auto& cached = small_ints_[static_cast<std::size_t>(value)];
      if (!cached) cached = Object::int_of(value);
      return cached;
    }
    charge(kObjectBytes);
    return Object::int_of(value);
  }

  // --- input ----------------------------------------------------------------
  const char* take(std::size_t n) {
    if (n > data_.size() - pos_) fail("it is truncated");
    const char* p = data_.data() + pos_;
    pos_ += n;
    return p;
  }
  std::uint8_t byte() { return static_cast<std::uint8_t>(*take(1)); }
  template <typename T>
  T little() {
    T value{};
    std::memcpy(&value, take(sizeof(T)), sizeof(T));  // x86-64 and aarch64 are little-endian, as pickles are
    return value;
  }
  std::size_t length(std::uint64_t n) {
    if (n > data_.size() - pos_) fail("a length runs past its end");
    return static_cast<std::size_t>(n);
  }
  std::string line() {
    const auto end = data_.find('\n', pos_);
    if (end == std::string_view::npos) fail("a text argument has no end of line");
    charge(end - pos_);
    std::string text(data_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return text;
  }

  // --- stack ----------------------------------------------------------------
  std::size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  ObjectPtr pop() {
    if (stack_.size() <= floor()) fail("the stack is empty");
    auto top = std::move(stack_.back());
    stack_.pop_back();
    return top;
  }
  const ObjectPtr& top() const {
    if (stack_.size() <= floor()) fail("the stack is empty");
    return stack_.back();
  }
  // The top `n` objects, in the order they were pushed (TUPLE1..3).
  std::vector<ObjectPtr> pop_top(std::size_t n) {
    std::vector<ObjectPtr> items(n);
    for (auto i = n; i > 0; --i) items[i - 1] = pop();
    return items;
  }
  std::vector<ObjectPtr> pop_mark() {
    if (marks_.empty()) fail("there is no MARK");
    const auto k = marks_.back();
    marks_.pop_back();
    std::vector<ObjectPtr> items(std::make_move_iterator(stack_.begin() + static_cast<std::ptrdiff_t>(k)),
                                 std::make_move_iterator(stack_.end()));
    stack_.resize(k);
    return items;
  }
  void push(ObjectPtr o) {
    if (stack_.size() >= kMaxStackObjects)
      fail("more than " + std::to_string(kMaxStackObjects) + " objects are on the stack at once");
    stack_.push_back(std::move(o));
  }
  void mark() {
    if (marks_.size() >= kMaxOpenMarks) fail("more than " + std::to_string(kMaxOpenMarks) + " MARKs are open at once");
    marks_.push_back(stack_.size());
  }

  ObjectPtr container(Kind kind) {
    containers_.push_back(make(kind));
    return containers_.back();
  }
  // The n-th object `o` holds (items, then dict keys and values), or nullptr.
  static const Object* child_of(const Object& o, std::size_t n) {
    if (n < o.items.size()) return o.items[n].get();
    n -= o.items.size();
    if (n >= 2 * o.entries.size()) return nullptr;
    const auto& entry = o.entries[n / 2];
    return (n % 2 == 0 ? entry.first : entry.second).get();
  }

  // The memo is an array, as in CPython's unpickler: picklers number their
  // entries 0, 1, 2, ..., and each entry takes at least one byte, so an index
  // at or past the pickle's size is refused before the array grows to it.
  void memo_put(std::uint64_t index) {
    if (index >= data_.size())
      fail("memo index " + std::to_string(index) + " is beyond what a pickle of " + std::to_string(data_.size()) +
           " bytes can use");
    if (index >= memo_.size()) memo_.resize(static_cast<std::size_t>(index) + 1);
    auto& slot = memo_[static_cast<std::size_t>(index)];
    if (!slot) ++memo_count_;
    slot = top();
  }
  ObjectPtr memo_get(std::uint64_t index) const {
    if (index >= memo_.size() || !memo_[static_cast<std::size_t>(index)])
      fail("memo entry " + std::to_string(index) + " is missing");
    return memo_[static_cast<std::size_t>(index)];
  }

  // --- values ---------------------------------------------------------------
  std::int64_t two_complement(const char* p, std::size_t n) {
    if (n == 0) return 0;
    const bool negative = (static_cast<std::uint8_t>(p[n - 1]) & 0x80) != 0;
    // Bytes beyond 8 must be pure sign extension for the value to fit int64.
    for (std::size_t i = 8; i < n; ++i)
      if (static_cast<std::uint8_t>(p[i]) != (negative ? 0xff : 0x00)) fail("an integer does not fit in 64 bits");
    std::uint64_t value = negative ? ~std::uint64_t{0} : 0;
    for (std::size_t i = 0; i < std::min<std::size_t>(n, 8); ++i) {
      value &= ~(std::uint64_t{0xff} << (8 * i));
      value |= std::uint64_t{static_cast<std::uint8_t>(p[i])} << (8 * i);
    }
    if (n >= 8 && ((value >> 63) != 0) != negative) fail("an integer does not fit in 64 bits");
    return static_cast<std::int64_t>(value);
  }

  std::int64_t text_int(std::string text) {
    if (!text.empty() && text.back() == 'L') text.pop_back();
    try {
      std::size_t used = 0;
      const auto v = std::stoll(text, &used, 10);
      if (used != text.size()) fail("malformed integer '" + text + "'");
      return v;
    } catch (const std::out_of_range&) {
      fail("an integer does not fit in 64 bits");
    } catch (const std::invalid_argument&) {
      fail("malformed integer '" + text + "'");
    }
  }

  static std::vector<std::int64_t> ints_of(const Object& tuple, bool& ok) {
    std::vector<std::int64_t> out;
    ok = tuple.kind == Kind::Tuple || tuple.kind == Kind::List;
    if (!ok) return out;
    for (const auto& item : tuple.items) {
      if (item->kind != Kind::Int) {
        ok = false;
        return out;
      }
      out.push_back(item->integer);
    }
    return out;
  }

  ObjectPtr persistent(const Object& pid) {
    const auto& a = pid.items;
    const bool shaped = pid.kind == Kind::Tuple && a.size() == 5 &&
                        (a[0]->kind == Kind::Str || a[0]->kind == Kind::Bytes) && a[0]->text == "storage";
    if (!shaped) fail("a persistent id is not a ('storage', type, key, location, numel) tuple: " + describe(pid));
    const auto& type = *a[1];
    if (type.kind != Kind::Global) fail("a storage type is " + describe(type));
    // PyTorch 2.x: an UntypedStorage of numel bytes, typed by _rebuild_tensor_v3.
    const bool untyped = (type.text == "torch" || type.text == "torch.storage") && type.name == "UntypedStorage";
    const auto known = type.text == "torch" ? legacy_storage_dtype(type.name) : std::nullopt;
    if (!known && !untyped)
      fail("storage type " + type.text + "." + type.name + " is not supported (" + supported() + ")");
    const DType dtype = known.value_or(DType::UInt8);  // an UntypedStorage counts bytes
    if (a[2]->kind != Kind::Str || a[3]->kind != Kind::Str || a[4]->kind != Kind::Int || a[4]->integer < 0)
      fail("a storage's key, location or size is malformed");
    if (!untyped && !product(a[4]->integer, static_cast<std::int64_t>(dtype_size(dtype))))
      fail("storage '" + a[2]->text + "' of " + std::to_string(a[4]->integer) + " " + std::string(dtype_name(dtype)) +
           " elements has more bytes than a 64-bit size can count");
    auto& storage = storages_[a[2]->text];
    if (!storage) {
      storage = std::make_shared<Storage>(Storage{.key = a[2]->text,
                                                  .dtype = dtype,
                                                  .numel = a[4]->integer,
                                                  .location = a[3]->text,
                                                  .untyped = untyped,
                                                  .typed = !untyped});
    } else {
      const auto bytes_named = storage->typed && untyped
                                   ? storage->numel * static_cast<std::int64_t>(dtype_size(storage->dtype))
                                   : storage->numel;
      if (storage->untyped != untyped || (!untyped && storage->dtype != dtype) || bytes_named != a[4]->integer)
        fail("storage '" + a[2]->text + "' is named with two different types or sizes");
    }
    auto o = make(Kind::Storage);
    o->storage = storage;
    return o;
  }

  // _rebuild_tensor_v3(storage, offset, sizes, strides, requires_grad,
  // hooks, dtype): the dtype types the UntypedStorage (its byte count must
  // be a whole number of elements), which every other view must share.
  ObjectPtr rebuild_tensor_v3(const std::vector<ObjectPtr>& args) {
    if (args.size() < 7 || args[0]->kind != Kind::Storage || args[6]->kind != Kind::Global)
      fail("a tensor is rebuilt (_rebuild_tensor_v3) from unexpected arguments");
    const auto& type = *args[6];
    const auto dtype = type.text == "torch" ? dtype_from_name(type.name) : std::nullopt;
    if (!dtype) {
      // Refused where its key is known (the state dict's walk), not here.
      auto unstorable = make(Kind::Global);
      unstorable->text = type.text;
      unstorable->name = type.name;
      unstorable->unstorable_tensor = true;
      return unstorable;
    }
    // The storage objects of the stack share the one in storages_: typing it
    // here types every view of it.
    auto& storage = *storages_.at(args[0]->storage->key);
    if (storage.typed) {
      if (storage.dtype != *dtype)
        fail("storage '" + storage.key + "' is viewed as " + std::string(dtype_name(storage.dtype)) + " and as " +
             std::string(dtype_name(*dtype)));
    } else {
      const auto element = static_cast<std::int64_t>(dtype_size(*dtype));
      if (storage.numel % element != 0)
        fail("storage '" + storage.key + "' has " + std::to_string(storage.numel) + " bytes, not a whole number of " +
             std::string(dtype_name(*dtype)) + " elements");
      storage.dtype = *dtype;
      storage.numel /= element;
      storage.typed = true;
    }
    return rebuild_tensor(args);
  }

  ObjectPtr rebuild_tensor(const std::vector<ObjectPtr>& args) {
    if (args.size() < 4 || args[0]->kind != Kind::Storage || args[1]->kind != Kind::Int)
      fail("a tensor is rebuilt from unexpected arguments");
    if (!args[0]->storage->typed) fail("a tensor views an UntypedStorage without naming its dtype");
    if (args[2]->items.size() > kMaxTensorDims)
      fail("a tensor has " + std::to_string(args[2]->items.size()) + " dimensions, more than " +
           std::to_string(kMaxTensorDims));
    bool sizes_ok = false;
    bool strides_ok = false;
    TensorView view;
    view.storage = args[0]->storage;
    view.storage_offset = args[1]->integer;
    view.sizes = ints_of(*args[2], sizes_ok);
    view.strides = ints_of(*args[3], strides_ok);
    if (!sizes_ok || !strides_ok || view.sizes.size() != view.strides.size() || view.storage_offset < 0)
      fail("a tensor has malformed sizes, strides or storage offset");
    check_view(view);
    charge(kObjectBytes + sizeof(TensorView) + 16 + 2 * sizeof(std::int64_t) * view.sizes.size());
    return Object::tensor_of(std::move(view));
  }

  // A view must lie inside its storage, and every size derived from it
  // (elements, bytes, the last element's index) must fit in 64 bits: later
  // code multiplies them without checking again.
  void check_view(const TensorView& view) const {
    const auto& storage = *view.storage;
    const auto element = static_cast<std::int64_t>(dtype_size(storage.dtype));
    std::optional<std::int64_t> bytes =
        element;  // of the view's elements; zero sizes are skipped so none hides an overflow
    std::int64_t last = view.storage_offset;  // the last element's index in the storage
    bool empty = false;
    for (std::size_t d = 0; d < view.sizes.size(); ++d) {
      const auto size = view.sizes[d];
      const auto stride = view.strides[d];
      if (size < 0 || stride < 0) fail("a tensor has a negative size or stride");
      if (size == 0) {
        empty = true;
        continue;
      }
      bytes = bytes ? product(*bytes, size) : std::nullopt;
      const auto reach = product(size - 1, stride);
      if (!bytes || !reach || __builtin_add_overflow(last, *reach, &last))
        fail("a tensor of sizes " + ints_text(view.sizes) + " and strides " + ints_text(view.strides) +
             " has more elements or bytes than a 64-bit size can count");
    }
    if (!empty && *bytes > kMaxTensorBytes)
      fail("a tensor of sizes " + ints_text(view.sizes) + " has " + std::to_string(*bytes) +
           " bytes, more than h5dcp's limit of " + std::to_string(kMaxTensorBytes) + " for one tensor");
    if (empty ? view.storage_offset > storage.numel : last >= storage.numel)
      fail("a tensor view (offset " + std::to_string(view.storage_offset) + ", sizes " + ints_text(view.sizes) +
           ", strides " + ints_text(view.strides) + ") reaches element " + std::to_string(last) + " of storage '" +
           storage.key + "', which has " + std::to_string(storage.numel));
  }

  static std::string ints_text(const std::vector<std::int64_t>& values) {
    std::string out = "[";
    for (std::size_t i = 0; i < values.size() && i < 8; ++i) out += (i ? ", " : "") + std::to_string(values[i]);
    return out + (values.size() > 8 ? ", ...]" : "]");
  }

  static std::string latin1_bytes(const std::string& utf8, bool& ok) {
    std::string out;
    ok = true;
    for (std::size_t i = 0; i < utf8.size(); ++i) {
      const auto c = static_cast<std::uint8_t>(utf8[i]);
      if (c < 0x80) {
        out.push_back(static_cast<char>(c));
      } else if ((c == 0xc2 || c == 0xc3) && i + 1 < utf8.size()) {
        const auto next = static_cast<std::uint8_t>(utf8[++i]);
        out.push_back(static_cast<char>(((c & 0x03) << 6) | (next & 0x3f)));
      } else {
        ok = false;
        return {};
      }
    }
    return out;
  }

  ObjectPtr call(const Object& callable, const Object& args) {
    if (callable.kind != Kind::Global) fail("REDUCE calls " + describe(callable));
    if (args.kind != Kind::Tuple) fail("REDUCE passes " + describe(args) + " as arguments");
    const auto& m = callable.text;
    const auto& n = callable.name;
    const auto& a = args.items;
    if (kind_ == PicklesOf::DcpMetadata) return call_dcp(callable, args);
    if (m == "collections" && n == "OrderedDict" && a.empty()) return container(Kind::Dict);
    if (m == "torch._utils" && (n == "_rebuild_tensor_v2" || n == "_rebuild_tensor")) return rebuild_tensor(a);
    if (m == "torch._utils" && n == "_rebuild_tensor_v3") return rebuild_tensor_v3(a);
    if (m == "torch._utils" && (n == "_rebuild_parameter" || n == "_rebuild_parameter_with_state")) {
      if (a.empty() || a[0]->kind != Kind::Tensor) fail("a parameter is rebuilt from " + describe(args));
      return a[0];
    }
    if (m == "torch._tensor" && n == "_rebuild_from_type_v2") {
      // (func, new_type, args, state): a tensor with Python attributes; we keep the tensor.
      if (a.size() < 3) fail("_rebuild_from_type_v2 has too few arguments");
      if (a[0]->kind == Kind::Global && a[0]->text == m && a[0]->name == n)
        fail("_rebuild_from_type_v2 rebuilds with itself");  // torch never does; the recursion has no end
      return call(*a[0], *a[2]);
    }
    if (m == "_codecs" && n == "encode" && a.size() == 2 && a[0]->kind == Kind::Str && a[1]->kind == Kind::Str &&
        (a[1]->text == "latin1" || a[1]->text == "latin-1")) {
      bool ok = false;
      auto raw = latin1_bytes(a[0]->text, ok);
      if (!ok) fail("bytes are encoded with characters outside latin-1");
      return make_text(Kind::Bytes, std::move(raw));
    }
    if (is_builtins(m) && n == "bytes" && a.empty()) return make_text(Kind::Bytes, "");
    if (m == "torch" && n == "Size" && a.size() == 1 && a[0]->kind == Kind::Tuple) return a[0];
    fail("unsupported object " + m + "." + n + " (" + supported() + ")");
  }

  // The callables DCP's metadata pickles (every global was checked against
  // is_dcp_global when named): none runs code, each becomes plain data.
  ObjectPtr call_dcp(const Object& callable, const Object& args) {
    const auto& m = callable.text;
    const auto& n = callable.name;
    const auto& a = args.items;
    const auto one_of = [&](Kind kind) { return a.size() == 1 && a[0]->kind == kind; };
    if (m == "torch" && n == "Size" && one_of(Kind::Tuple)) return a[0];
    if (m == "collections" && n == "OrderedDict" && a.empty()) return container(Kind::Dict);
    if (m == "torch.serialization" && n == "_get_layout" && one_of(Kind::Str)) return a[0];  // "torch.strided"
    if (m == kDcpMetadataModule && n == "_MEM_FORMAT_ENCODING" && one_of(Kind::Int)) return a[0];
    if (m == "pathlib" && !a.empty()) {
      std::string path;
      for (const auto& part : a) {
        if (part->kind != Kind::Str) fail("a pathlib path of " + describe(*part));
        if (!path.empty() && path.back() != '/') path += '/';
        path += part->text;
      }
      return make_text(Kind::Str, std::move(path));
    }
    fail("DCP metadata calls " + m + "." + n + " with " + describe(args) + ", which h5dcp does not read");
  }

  // NEWOBJ: an instance of an allowed DCP class, without constructor arguments
  // (dataclasses pickle their fields as BUILD's state).
  ObjectPtr new_object(const Object& cls, const Object& args) {
    if (kind_ != PicklesOf::DcpMetadata) fail("NEWOBJ makes " + describe(cls) + " (" + supported() + ")");
    if (cls.kind != Kind::Global || !is_dcp_class(cls.text, cls.name))
      fail("NEWOBJ makes " + describe(cls) + ", which is not a DCP metadata class");
    if (args.kind != Kind::Tuple || !args.items.empty())
      fail("NEWOBJ makes " + describe(cls) + " with constructor arguments");
    auto o = container(Kind::Instance);
    o->text = cls.text;
    o->name = cls.name;
    return o;
  }

  // A global as the pickle names it: anything may be named in a torch.save
  // pickle (call() refuses what it does not know), only allowed ones in DCP metadata.
  ObjectPtr global(std::string module, std::string name) {
    if (kind_ == PicklesOf::DcpMetadata && !is_dcp_global(module, name))
      fail("it names " + module + "." + name +
           ", which is not among the classes and functions of DCP metadata that h5dcp reads (nothing in the "
           "file is executed)");
    charge(module.size() + name.size());
    auto g = make(Kind::Global);
    g->text = std::move(module);
    g->name = std::move(name);
    return g;
  }

  ObjectPtr tuple_of(std::vector<ObjectPtr> items) {
    auto t = container(Kind::Tuple);
    t->items = std::move(items);
    return t;
  }

  void set_items(Object& dict, std::vector<ObjectPtr>& pairs) {
    if (dict.kind != Kind::Dict) fail("SETITEM(S) on " + describe(dict));
    if (pairs.size() % 2 != 0) fail("SETITEMS has an odd number of items");
    for (std::size_t i = 0; i < pairs.size(); i += 2) dict.entries.emplace_back(pairs[i], pairs[i + 1]);
  }

  void append_items(Object& list, std::vector<ObjectPtr>& items) {
    if (list.kind != Kind::List) fail("APPEND(S) on " + describe(list));
    for (auto& item : items) list.items.push_back(std::move(item));
  }

  // SETITEM(S) and APPEND(S) fill the object below what they popped (taken
  // as an argument, so popped before top() is read).
  void set_items_of_top(std::vector<ObjectPtr> pairs) { set_items(*top(), pairs); }
  void append_to_top(std::vector<ObjectPtr> items) { append_items(*top(), items); }

  void step(std::uint8_t op) {
    switch (op) {
      case kProto: {
        const auto version = byte();
        if (version > 5) fail("pickle protocol " + std::to_string(version) + " is newer than 5");
        return;
      }
      case kFrame: (void)little<std::uint64_t>(); return;  // framing only
      case kMark: mark(); return;
      case kPop: (void)pop(); return;
      case kPopMark: (void)pop_mark(); return;
      case kDup: push(top()); return;
      // None, True and False are shared: nothing changes them once made.
      case kNone: push(none_); return;
      case kNewTrue: push(true_); return;
      case kNewFalse: push(false_); return;
      case kBinInt: push(make_int(little<std::int32_t>())); return;
      case kBinInt1: push(make_int(byte())); return;
      case kBinInt2: push(make_int(little<std::uint16_t>())); return;
      case kLong1: {
        const auto n = byte();
        push(make_int(two_complement(take(n), n)));
        return;
      }
      case kLong4: {
        const auto n = little<std::int32_t>();
        if (n < 0) fail("LONG4 has a negative length");
        const auto len = length(static_cast<std::uint64_t>(n));
        push(make_int(two_complement(take(len), len)));
        return;
      }
      case kInt: {
        const auto text = line();
        if (text == "00" || text == "01")
          push(text == "01" ? true_ : false_);
        else
          push(make_int(text_int(text)));
        return;
      }
      case kLong: push(make_int(text_int(line()))); return;
      case kBinFloat: {
        std::uint64_t bits = 0;
        const char* p = take(8);
        for (int i = 0; i < 8; ++i) bits = (bits << 8) | static_cast<std::uint8_t>(p[i]);  // big-endian
        double value = 0;
        std::memcpy(&value, &bits, sizeof value);
        charge(kObjectBytes);
        push(Object::float_of(value));
        return;
      }
      case kFloat: {
        const auto text = line();
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (end == text.c_str()) fail("malformed float '" + text + "'");
        charge(kObjectBytes);
        push(Object::float_of(value));
        return;
      }
      case kShortBinUnicode: push(counted_text(Kind::Str, byte())); return;
      case kBinUnicode: push(counted_text(Kind::Str, length(little<std::uint32_t>()))); return;
      case kBinUnicode8: push(counted_text(Kind::Str, length(little<std::uint64_t>()))); return;
      case kShortBinBytes: push(counted_text(Kind::Bytes, byte())); return;
      case kBinBytes: push(counted_text(Kind::Bytes, length(little<std::uint32_t>()))); return;
      case kBinBytes8: push(counted_text(Kind::Bytes, length(little<std::uint64_t>()))); return;
      case kEmptyList: push(container(Kind::List)); return;
      case kEmptyDict: push(container(Kind::Dict)); return;
      case kEmptyTuple: push(container(Kind::Tuple)); return;
      case kList: {
        auto list = container(Kind::List);
        list->items = pop_mark();
        push(std::move(list));
        return;
      }
      case kTuple: push(tuple_of(pop_mark())); return;
      case kTuple1: push(tuple_of(pop_top(1))); return;
      case kTuple2: push(tuple_of(pop_top(2))); return;
      case kTuple3: push(tuple_of(pop_top(3))); return;
      case kDict: {
        auto dict = container(Kind::Dict);
        auto pairs = pop_mark();
        set_items(*dict, pairs);
        push(std::move(dict));
        return;
      }
      case kSetItem: set_items_of_top(pop_top(2)); return;
      case kSetItems: set_items_of_top(pop_mark()); return;
      case kAppend: append_to_top(pop_top(1)); return;
      case kAppends: append_to_top(pop_mark()); return;
      case kGlobal: {
        auto module = line();
        auto name = line();
        push(global(std::move(module), std::move(name)));
        return;
      }
      case kStackGlobal: {
        auto name = pop();
        auto module = pop();
        if (name->kind != Kind::Str || module->kind != Kind::Str) fail("STACK_GLOBAL needs two strings");
        push(global(module->text, name->text));
        return;
      }
      case kNewObj: {
        auto args = pop();
        auto cls = pop();
        push(new_object(*cls, *args));
        return;
      }
      case kReduce: {
        auto args = pop();
        auto callable = pop();
        push(call(*callable, *args));
        return;
      }
      case kBuild: {
        auto state = pop();
        const auto& object = top();
        if (object->kind == Kind::Instance) {
          // A dataclass's fields (a dict), or what its __getstate__ returns (a tuple), once.
          if (!object->entries.empty() || !object->items.empty()) fail("BUILD fills " + describe(*object) + " twice");
          if (state->kind == Kind::Dict)
            object->entries = state->entries;
          else if (state->kind == Kind::Tuple)
            object->items = state->items;
          else
            fail("BUILD fills " + describe(*object) + " with " + describe(*state));
          return;
        }
        // Attributes of an OrderedDict (a module state dict's _metadata) or a
        // tensor (Python attributes) have no place in a state dict: dropped.
        if (object->kind != Kind::Dict && object->kind != Kind::Tensor) fail("BUILD on " + describe(*object));
        return;
      }
      case kBinPersId: {
        if (kind_ == PicklesOf::DcpMetadata) fail("DCP metadata refers to a persistent object");
        auto pid = pop();
        push(persistent(*pid));
        return;
      }
      case kBinPut: memo_put(byte()); return;
      case kLongBinPut: memo_put(little<std::uint32_t>()); return;
      case kPut: memo_put(static_cast<std::uint64_t>(text_int(line()))); return;
      case kMemoize: memo_put(memo_count_); return;
      case kBinGet: push(memo_get(byte())); return;
      case kLongBinGet: push(memo_get(little<std::uint32_t>())); return;
      case kGet: push(memo_get(static_cast<std::uint64_t>(text_int(line())))); return;
      default: {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", op);
        fail(std::string("unsupported pickle opcode ") + hex + " (" + supported() + ")");
      }
    }
  }

  std::string_view data_;
  const std::string& what_;
  PicklesOf kind_;
  std::size_t pos_ = 0;
  std::size_t op_pos_ = 0;
  std::vector<ObjectPtr> stack_;
  std::vector<std::size_t> marks_;
  std::vector<ObjectPtr> memo_;   // by index; empty slots are entries never put
  std::uint64_t memo_count_ = 0;  // entries put: MEMOIZE's next index
  std::uint64_t budget_;          // bytes of memory the pickle may take (see kMemoryPerInputByte)
  std::uint64_t charged_ = 0;
  const ObjectPtr none_ = Object::none();
  const ObjectPtr true_ = Object::boolean_of(true);
  const ObjectPtr false_ = Object::boolean_of(false);
  std::vector<ObjectPtr> small_ints_ = std::vector<ObjectPtr>(256);
  std::map<std::string, std::shared_ptr<Storage>> storages_;
  std::vector<ObjectPtr> containers_;  // every list, tuple and dict made (see check_containers)
};

}  // namespace

ObjectPtr unpickle(std::string_view data, const std::string& what, UnpickleStats* stats, PicklesOf kind) {
  Unpickler unpickler(data, what, kind);
  try {
    auto result = unpickler.run();
    unpickler.check_containers();
    if (stats != nullptr) *stats = unpickler.stats();
    return result;
  } catch (...) {
    unpickler.dismantle();
    throw;
  }
}

}  // namespace h5dcp::detail::pickle
