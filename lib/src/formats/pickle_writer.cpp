#include "formats/pickle_writer.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "base/utf8.hpp"
#include "h5dcp/error.hpp"

namespace h5dcp::detail::pickle {
namespace {

constexpr std::size_t kBatch = 1000;  // Python's pickler batches APPENDS/SETITEMS by 1000

class Pickler {
 public:
  std::string run(const Object& root) {
    out_ += "\x80\x02";  // PROTO 2, as torch.save
    write(root);
    out_ += '.';
    return std::move(out_);
  }

 private:
  void op(char c) { out_ += c; }
  void u32(std::uint32_t v) {
    char b[4];
    std::memcpy(b, &v, 4);  // little-endian hosts only, like the rest of h5dcp's byte codecs
    out_.append(b, 4);
  }

  void integer(std::int64_t v) {
    if (v >= 0 && v <= 0xff) {
      op('K');
      out_ += static_cast<char>(v);
    } else if (v >= 0 && v <= 0xffff) {
      op('M');
      out_ += static_cast<char>(v & 0xff);
      out_ += static_cast<char>(v >> 8);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
      op('J');
      u32(static_cast<std::uint32_t>(static_cast<std::int32_t>(v)));
    } else {
      // LONG1: minimal two's complement, little-endian.
      std::string bytes(8, '\0');
      const auto u = static_cast<std::uint64_t>(v);
      for (int i = 0; i < 8; ++i) bytes[static_cast<std::size_t>(i)] = static_cast<char>((u >> (8 * i)) & 0xff);
      while (bytes.size() > 1) {
        const auto last = static_cast<std::uint8_t>(bytes[bytes.size() - 1]);
        const auto prev = static_cast<std::uint8_t>(bytes[bytes.size() - 2]);
        if ((last == 0x00 && (prev & 0x80) == 0) || (last == 0xff && (prev & 0x80) != 0))
          bytes.pop_back();
        else
          break;
      }
      op('\x8a');
      out_ += static_cast<char>(bytes.size());
      out_ += bytes;
    }
  }

  void real(double v) {
    op('G');
    std::uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    for (int i = 7; i >= 0; --i) out_ += static_cast<char>((bits >> (8 * i)) & 0xff);  // big-endian
  }

  void str(const std::string& s) {
    if (!is_valid_utf8(s)) throw UsageError("h5dcp: a string to write into a torch.save file is not valid UTF-8");
    if (s.size() > UINT32_MAX) throw UsageError("h5dcp: a string is too long for a torch.save file");
    op('X');
    u32(static_cast<std::uint32_t>(s.size()));
    out_ += s;
  }

  void global(const char* module, const char* name) {
    op('c');
    out_ += module;
    out_ += '\n';
    out_ += name;
    out_ += '\n';
  }

  void bytes(const std::string& raw) {
    // As Python 3 pickles non-empty bytes for protocol 2: _codecs.encode(latin-1
    // text, "latin1"); empty ones too (Python writes builtins.bytes(), which
    // torch.load(weights_only=True), PyTorch's default since 2.6, refuses).
    std::string text;
    for (const char ch : raw) {
      const auto c = static_cast<std::uint8_t>(ch);
      if (c < 0x80) {
        text += static_cast<char>(c);
      } else {
        text += static_cast<char>(0xc0 | (c >> 6));
        text += static_cast<char>(0x80 | (c & 0x3f));
      }
    }
    global("_codecs", "encode");
    str(text);
    str("latin1");
    op('\x86');
    op('R');
  }

  void tuple_of_ints(const std::vector<std::int64_t>& values) {
    if (values.empty()) {
      op(')');
      return;
    }
    if (values.size() > 3) op('(');
    for (const auto v : values) integer(v);
    if (values.size() == 1)
      op('\x85');
    else if (values.size() == 2)
      op('\x86');
    else if (values.size() == 3)
      op('\x87');
    else
      op('t');
  }

  // As torch.save in PyTorch 2.x: dtypes with a legacy storage class as
  // _rebuild_tensor_v2 of a torch.<Type>Storage of `numel` elements, the
  // others as _rebuild_tensor_v3 of an UntypedStorage of `numel` bytes, with
  // the dtype as the last argument (both load with weights_only=True).
  void tensor(const TensorView& view) {
    if (!view.storage) throw UsageError("h5dcp: a tensor to pickle has no storage");
    const auto dtype = view.storage->dtype;
    const char* storage_class = storage_class_name(dtype);
    global("torch._utils", storage_class != nullptr ? "_rebuild_tensor_v2" : "_rebuild_tensor_v3");
    op('(');
    // The persistent id: ('storage', storage type, key, location, numel).
    op('(');
    str("storage");
    if (storage_class != nullptr)
      global("torch", storage_class);
    else
      global("torch.storage", "UntypedStorage");  // as torch.save names it; weights_only allows only this
    str(view.storage->key);
    str(view.storage->location);
    integer(storage_class != nullptr ? view.storage->numel
                                     : view.storage->numel * static_cast<std::int64_t>(dtype_size(dtype)));
    op('t');
    op('Q');
    integer(view.storage_offset);
    tuple_of_ints(view.sizes);
    tuple_of_ints(view.strides);
    op('\x89');                            // requires_grad = False
    global("collections", "OrderedDict");  // backward hooks: OrderedDict()
    op(')');
    op('R');
    if (storage_class == nullptr) global("torch", std::string(dtype_name(dtype)).c_str());
    op('t');
    op('R');
  }

  // EMPTY_TUPLE, or MARK, the items, TUPLE.
  void tuple(const std::vector<ObjectPtr>& items) {
    if (items.empty()) return op(')');
    op('(');
    for (const auto& item : items) write(*item);
    op('t');
  }
  void entry(const std::pair<ObjectPtr, ObjectPtr>& key_value) {
    write(*key_value.first);
    write(*key_value.second);
  }
  // `count` items, each written by `write_item`, as Python's pickler batches
  // them: MARK, up to kBatch items, then `end` (APPENDS or SETITEMS).
  template <typename WriteItem>
  void batched(std::size_t count, char end, WriteItem&& write_item) {
    for (std::size_t i = 0; i < count; i += kBatch) {
      op('(');
      for (std::size_t k = i; k < std::min(count, i + kBatch); ++k) write_item(k);
      op(end);
    }
  }

  void write(const Object& o) {
    switch (o.kind) {
      case Kind::None: op('N'); return;
      case Kind::Bool: op(o.boolean ? '\x88' : '\x89'); return;
      case Kind::Int: integer(o.integer); return;
      case Kind::Float: real(o.real); return;
      case Kind::Str: str(o.text); return;
      case Kind::Bytes: bytes(o.text); return;
      case Kind::Tensor: tensor(*o.tensor); return;
      case Kind::Tuple: tuple(o.items); return;
      case Kind::List:
        op(']');
        batched(o.items.size(), 'e', [&](std::size_t k) { write(*o.items[k]); });
        return;
      case Kind::Dict:
        // Always MARK ... SETITEMS, also for one entry: Python reads both, and
        // LibTorch 1.13's own unpickler (torch::pickle_load) rejects SETITEM.
        op('}');
        batched(o.entries.size(), 'u', [&](std::size_t k) { entry(o.entries[k]); });
        return;
      case Kind::Global:
        // A global (torch.float32), or with arguments a call of it (torch.Size((2, 3))).
        global(o.text.c_str(), o.name.c_str());
        if (o.items.empty()) return;
        tuple(o.items);
        op('R');
        return;
      case Kind::Instance: {
        // As Python pickles a dataclass: cls.__new__(cls), then BUILD with its
        // state: the tuple its __getstate__ returns, else its fields' dict.
        global(o.text.c_str(), o.name.c_str());
        op(')');
        op('\x81');  // NEWOBJ
        if (!o.items.empty()) {
          tuple(o.items);
        } else {
          op('}');
          op('(');
          for (const auto& e : o.entries) entry(e);
          op('u');
        }
        op('b');
        return;
      }
      case Kind::Storage: break;
    }
    throw UsageError("h5dcp: cannot pickle " + describe(o) + " into a torch.save file");
  }

  std::string out_;
};

}  // namespace

std::string pickle(const Object& root) { return Pickler().run(root); }

}  // namespace h5dcp::detail::pickle
