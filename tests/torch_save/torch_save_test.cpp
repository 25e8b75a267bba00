// torch.save interop in one process, without MPI_Init: h5dcp's pickle reader
// and writer, read_torch_save / write_torch_save on files written by real
// PyTorch (tests/interop/torch_save_cases.py, directory in
// H5DCP_TORCH_SAVE_FIXTURES), file kinds, and the checkpoint side:
// checkpoint_to_torch_save, CheckpointReader, verify_checkpoint; the
// exports' source, which closes under the HDF5 gate.

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <limits>
#include <memory>
#include <vector>

#include "formats/pickle_reader.hpp"
#include "formats/pickle_writer.hpp"
#include "formats/torch_save_index.hpp"
#include "h5dcp/checkpoint.hpp"
#include "h5dcp/checkpoint_reader.hpp"
#include "h5dcp/error.hpp"
#include "h5dcp/file_kind.hpp"
#include "h5dcp/torch_save.hpp"
#include "h5dcp/verify.hpp"
#include "hdf5/hdf5_gate.hpp"
#include "interop/shared/export_files.hpp"
#include "interop/torch_save/tree.hpp"
#include "test_support.hpp"

namespace h5dcp {
namespace {

namespace pickle = detail::pickle;
using test::bitwise_equal;
using test::reference_tensor;

std::string fixture(const std::string& name) {
  const char* dir = std::getenv("H5DCP_TORCH_SAVE_FIXTURES");
  if (dir == nullptr) {
    ADD_FAILURE() << "H5DCP_TORCH_SAVE_FIXTURES is not set (CTest sets it; the fixture test writes the files)";
    return "/nonexistent/" + name;
  }
  return std::string(dir) + "/" + name;
}

const at::Tensor& tensor_at(const StateDict& sd, const std::string& fqn) {
  return std::get<at::Tensor>(value_at(sd, fqn));
}

std::string bytes(std::initializer_list<int> values) {
  std::string out;
  for (const int v : values) out.push_back(static_cast<char>(v));
  return out;
}

template <typename E, typename F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "no exception";
  return {};
}

// --- the pickle reader and writer on their own --------------------------------

TEST(Pickle, SingleEntryDictWithSetItemAtEveryDepth) {
  // {'a': {'b': {'c': 1}}} as Python pickles it: SETITEM (0x73), which LibTorch
  // 1.13's unpickler rejects with "Unknown opcode for unpickling at 0x73".
  const auto data =
      bytes({0x80, 0x02, '}', 'q', 0,   'X', 1,   0, 0, 0, 'a', 'q', 1,   '}', 'q', 2, 'X', 1,   0,   0,  0,
             'b',  'q',  3,   '}', 'q', 4,   'X', 1, 0, 0, 0,   'c', 'q', 5,   'K', 1, 's', 's', 's', '.'});
  const auto root = pickle::unpickle(data, "test");
  ASSERT_EQ(root->kind, pickle::Kind::Dict);
  const auto index = detail::index_torch_save(*root, "test", data.size());
  ASSERT_EQ(index.values.count("a/b/c"), 1u);
  EXPECT_EQ(index.values.at("a/b/c").encoding, "int");
  EXPECT_EQ(index.containers.size(), 2u);
}

TEST(Pickle, WriterOutputReadsBackExactly) {
  auto dict = pickle::Object::of(pickle::Kind::Dict);
  const std::int64_t ints[] = {0,
                               1,
                               255,
                               256,
                               65535,
                               65536,
                               -1,
                               -129,
                               std::numeric_limits<std::int32_t>::min(),
                               std::int64_t{std::numeric_limits<std::int32_t>::min()} - 1,
                               std::numeric_limits<std::int32_t>::max(),
                               std::int64_t{std::numeric_limits<std::int32_t>::max()} + 1,
                               std::numeric_limits<std::int64_t>::min(),
                               std::numeric_limits<std::int64_t>::max()};
  auto list = pickle::Object::of(pickle::Kind::List);
  for (const auto v : ints) list->items.push_back(pickle::Object::int_of(v));
  dict->entries.emplace_back(pickle::Object::str_of("ints"), list);
  dict->entries.emplace_back(pickle::Object::str_of("f"), pickle::Object::float_of(-0.0));
  dict->entries.emplace_back(pickle::Object::str_of("s"), pickle::Object::str_of("h\xc3\xa9llo"));
  dict->entries.emplace_back(pickle::Object::str_of("b"), pickle::Object::bytes_of(std::string("\x00\x7f\x80\xff", 4)));
  dict->entries.emplace_back(pickle::Object::str_of("e"), pickle::Object::bytes_of(""));
  dict->entries.emplace_back(pickle::Object::str_of("n"), pickle::Object::none());
  const auto back = pickle::unpickle(pickle::pickle(*dict), "test");
  ASSERT_EQ(back->entries.size(), 6u);
  const auto& got = back->entries[0].second->items;
  ASSERT_EQ(got.size(), std::size(ints));
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i]->integer, ints[i]) << i;
  EXPECT_TRUE(std::signbit(back->entries[1].second->real));
  EXPECT_EQ(back->entries[2].second->text, "h\xc3\xa9llo");
  EXPECT_EQ(back->entries[3].second->kind, pickle::Kind::Bytes);
  EXPECT_EQ(back->entries[3].second->text, std::string("\x00\x7f\x80\xff", 4));
  EXPECT_EQ(back->entries[4].second->text, "");
  EXPECT_EQ(back->entries[5].second->kind, pickle::Kind::None);
}

// PyTorch 2.x's way for dtypes without a legacy storage class: an
// UntypedStorage of bytes, typed by _rebuild_tensor_v3's last argument.
TEST(Pickle, UntypedStoragesAreTypedByRebuildTensorV3) {
  const auto tensor_of = [](std::shared_ptr<pickle::Storage> storage, std::vector<std::int64_t> sizes) {
    pickle::TensorView view;
    view.storage = std::move(storage);
    view.strides = {1};
    view.sizes = std::move(sizes);
    return pickle::Object::tensor_of(std::move(view));
  };
  const auto storage = [](DType dtype, std::int64_t numel) {
    auto s = std::make_shared<pickle::Storage>();
    s->key = "0";
    s->dtype = dtype;
    s->numel = numel;
    return s;
  };
  auto dict = pickle::Object::of(pickle::Kind::Dict);
  const auto u16 = storage(DType::UInt16, 3);
  dict->entries.emplace_back(pickle::Object::str_of("a"), tensor_of(u16, {3}));
  dict->entries.emplace_back(pickle::Object::str_of("b"), tensor_of(u16, {2}));  // a second view
  const auto data = pickle::pickle(*dict);
  EXPECT_NE(data.find("_rebuild_tensor_v3"), std::string::npos);
  EXPECT_NE(data.find("UntypedStorage"), std::string::npos);
  const auto index = detail::index_torch_save(*pickle::unpickle(data, "t"), "t", data.size());
  ASSERT_EQ(index.storages.count("0"), 1u);
  EXPECT_EQ(index.storages.at("0").dtype, DType::UInt16);
  EXPECT_EQ(index.storages.at("0").numel, 3);  // 6 bytes in the pickle
  EXPECT_EQ(index.tensors.at("b").sizes, (std::vector<std::int64_t>{2}));

  // 6 bytes are no whole number of uint32 elements.
  auto odd = data;
  odd.replace(odd.find("uint16"), 6, "uint32");
  EXPECT_NE(message_of<FormatError>([&] { pickle::unpickle(odd, "t"); }).find("not a whole number of uint32"),
            std::string::npos);
  // One storage viewed with two dtypes (torch.save refuses to write that).
  auto two = pickle::Object::of(pickle::Kind::Dict);
  two->entries.emplace_back(pickle::Object::str_of("a"), tensor_of(storage(DType::UInt16, 2), {2}));
  two->entries.emplace_back(pickle::Object::str_of("b"), tensor_of(storage(DType::Float8_e5m2, 4), {4}));
  EXPECT_NE(message_of<FormatError>([&] {
              pickle::unpickle(pickle::pickle(*two), "t");
            }).find("is viewed as uint16 and as float8_e5m2"),
            std::string::npos);
  // A dtype h5dcp does not store, named by _rebuild_tensor_v3: refused with its key.
  auto bits = data;
  bits.replace(bits.find("uint16"), 6, "bits16");
  EXPECT_NE(message_of<FormatError>([&] {
              detail::index_torch_save(*pickle::unpickle(bits, "t"), "t", bits.size());
            }).find("'a' is a tensor of dtype torch.bits16, which h5dcp cannot store"),
            std::string::npos);
}

TEST(Pickle, DamageAndUnsupportedObjectsAreFormatErrors) {
  const auto truncated = bytes({0x80, 0x02, '}', 'q', 0, 'X', 5, 0, 0});
  EXPECT_NE(message_of<FormatError>([&] { pickle::unpickle(truncated, "t"); }).find("truncated"), std::string::npos);
  // A LONG1 of 9 bytes (2**64) that does not fit in 64 bits.
  const auto huge = bytes({0x80, 0x02, 0x8a, 9, 0, 0, 0, 0, 0, 0, 0, 0, 1, '.'});
  EXPECT_NE(message_of<FormatError>([&] { pickle::unpickle(huge, "t"); }).find("64 bits"), std::string::npos);
  // builtins.set([]) is not part of a state dict.
  const std::string set = bytes({0x80, 0x02}) + "c__builtin__\nset\n]" + bytes({0x85}) + "R.";
  EXPECT_NE(message_of<FormatError>([&] { pickle::unpickle(set, "t"); }).find("__builtin__.set"), std::string::npos);
  // {'l': l} where l = [l]: a list that contains itself, through the memo
  // (refused as it is read: the shared objects of a cycle are never freed).
  const auto self = bytes({0x80, 0x02, '}', 'q', 0, 'X', 1, 0, 0, 0, 'l', 'q', 1, ']', 'q', 2, 'h', 2, 'a', 's', '.'});
  EXPECT_NE(message_of<FormatError>([&] { pickle::unpickle(self, "t"); }).find("contains itself"), std::string::npos);
  // None in 1,001 nested 1-tuples: deeper than a reader's walks may recurse.
  const auto deep = bytes({0x80, 0x02, 'N'}) + std::string(1001, '\x85') + ".";
  EXPECT_NE(message_of<FormatError>([&] { pickle::unpickle(deep, "t"); }).find("nest deeper"), std::string::npos);
}

// --- files written by PyTorch ---------------------------------------------------

TEST(ReadTorchSave, EveryDtypeBitForBit) {
  const auto sd = read_torch_save(fixture("matrix.pt"));
  // PyTorch 2.x pickles the dtypes after bool with _rebuild_tensor_v3 and an
  // UntypedStorage (complex64/128 with their legacy storage classes).
  const std::pair<const char*, at::ScalarType> dtypes[] = {{"float64", at::kDouble},
                                                           {"float32", at::kFloat},
                                                           {"float16", at::kHalf},
                                                           {"bfloat16", at::kBFloat16},
                                                           {"int64", at::kLong},
                                                           {"int32", at::kInt},
                                                           {"int16", at::kShort},
                                                           {"int8", at::kChar},
                                                           {"uint8", at::kByte},
                                                           {"bool", at::kBool},
                                                           {"uint16", at::kUInt16},
                                                           {"uint32", at::kUInt32},
                                                           {"uint64", at::kUInt64},
                                                           {"float8_e4m3fn", at::kFloat8_e4m3fn},
                                                           {"float8_e5m2", at::kFloat8_e5m2},
                                                           {"float8_e4m3fnuz", at::kFloat8_e4m3fnuz},
                                                           {"float8_e5m2fnuz", at::kFloat8_e5m2fnuz},
                                                           {"float8_e8m0fnu", at::kFloat8_e8m0fnu},
                                                           {"complex32", at::kComplexHalf},
                                                           {"complex64", at::kComplexFloat},
                                                           {"complex128", at::kComplexDouble}};
  static_assert(std::size(dtypes) == static_cast<std::size_t>(kLastDType) + 1, "every dtype h5dcp stores");
  for (const auto& [name, dtype] : dtypes)
    EXPECT_TRUE(bitwise_equal(tensor_at(sd, std::string("dtypes/") + name), reference_tensor({3, 5}, dtype))) << name;
}

TEST(ReadTorchSave, SingleEntryDictsAtAnyDepth) {
  const auto sd = read_torch_save(fixture("matrix.pt"));
  EXPECT_TRUE(bitwise_equal(tensor_at(sd, "nested/a/b/c"), reference_tensor({2}, at::kBFloat16)));
  EXPECT_EQ(std::get<std::int64_t>(value_at(sd, "one/only")), 1);
  EXPECT_TRUE(std::holds_alternative<std::monostate>(value_at(sd, "lists/1/1/1/x")));
}

TEST(ReadTorchSave, ViewsKeepTheirStorageOffsetsAndStrides) {
  const auto sd = read_torch_save(fixture("matrix.pt"));
  const auto& base = tensor_at(sd, "views/base");
  const auto& transposed = tensor_at(sd, "views/transposed");
  EXPECT_TRUE(bitwise_equal(base, reference_tensor({6, 8}, at::kFloat)));
  EXPECT_TRUE(bitwise_equal(transposed, base.t()));
  EXPECT_EQ(transposed.strides(), (at::IntArrayRef{1, 8}));
  EXPECT_TRUE(transposed.is_alias_of(base));
  EXPECT_TRUE(bitwise_equal(tensor_at(sd, "views/strided"), base.slice(0, 0, 6, 2).slice(1, 1, 8, 3)));
  EXPECT_TRUE(tensor_at(sd, "views/strided").is_alias_of(base));
  EXPECT_EQ(tensor_at(sd, "views/narrow").storage_offset(), 16);
  EXPECT_EQ(tensor_at(sd, "views/expanded").strides(), (at::IntArrayRef{0, 1}));
  EXPECT_EQ(tensor_at(sd, "views/scalar").dim(), 0);
  EXPECT_EQ(tensor_at(sd, "views/scalar").item<double>(), 3.5);
  EXPECT_EQ(tensor_at(sd, "views/empty").sizes(), (at::IntArrayRef{0, 4}));
  const auto& whole = tensor_at(sd, "shared/whole");
  EXPECT_TRUE(tensor_at(sd, "shared/tail").is_alias_of(whole));
  EXPECT_EQ(tensor_at(sd, "shared/tail").storage_offset(), 5);
  EXPECT_TRUE(tensor_at(sd, "shared/again").is_alias_of(whole));
}

TEST(ReadTorchSave, ValuesAndTheDocumentedMapping) {
  const auto sd = read_torch_save(fixture("matrix.pt"));
  EXPECT_EQ(std::get<std::int64_t>(value_at(sd, "values/big")), std::int64_t{1} << 62);
  EXPECT_EQ(std::get<std::int64_t>(value_at(sd, "values/neg")), -3);
  EXPECT_EQ(std::get<double>(value_at(sd, "values/float")), 0.1);
  EXPECT_TRUE(std::isnan(std::get<double>(value_at(sd, "values/nan"))));
  EXPECT_EQ(std::get<std::string>(value_at(sd, "values/str")), "h\xc3\xa9llo \xe2\x9c\x93");
  EXPECT_EQ(std::get<bool>(value_at(sd, "values/true")), true);
  EXPECT_EQ(std::get<ByteString>(value_at(sd, "values/bytes")).data, std::string("\x00\x01\x7f\x80\xff", 5));
  EXPECT_EQ(std::get<ByteString>(value_at(sd, "values/empty_bytes")).data, "");
  EXPECT_TRUE(std::get<StateDict>(value_at(sd, "empty_dict")).empty());
  EXPECT_TRUE(std::get<StateList>(value_at(sd, "empty_list")).empty());
  // Tuples become lists; an optimizer's int keys become text.
  EXPECT_EQ(std::get<std::string>(value_at(sd, "lists/2/1")), "tuple");
  EXPECT_TRUE(std::get<StateDict>(value_at(sd, "optim/state")).count("0") == 1);
  // An OrderedDict (module state dict) is a dict; its _metadata is dropped.
  const auto& module = std::get<StateDict>(value_at(sd, "module"));
  EXPECT_EQ(module.count("0.weight"), 1u);
  EXPECT_EQ(module.count("_metadata"), 0u);
  EXPECT_EQ(std::get<std::string>(value_at(sd, fqn_of({"key with/slash", ""}))), "empty key");
}

TEST(ReadTorchSave, Protocol4IsReadTheSame) {
  const auto a = flatten_state_dict(read_torch_save(fixture("matrix.pt")));
  const auto b = flatten_state_dict(read_torch_save(fixture("proto4.pt")));
  ASSERT_EQ(a.leaves.size(), b.leaves.size());
  EXPECT_EQ(a.containers, b.containers);
  for (const auto& [fqn, value] : a.leaves) {
    ASSERT_EQ(b.leaves.count(fqn), 1u) << fqn;
    if (const auto* t = std::get_if<at::Tensor>(&value)) {
      EXPECT_TRUE(bitwise_equal(*t, std::get<at::Tensor>(b.leaves.at(fqn)))) << fqn;
    }
  }
}

TEST(ReadTorchSave, CompressedRecordsAreRefused) {
  // torch.save stores its records; a deflated one could inflate to any size,
  // so every reader refuses it before reading it, naming the record.
  const auto read = message_of<FormatError>([] { read_torch_save(fixture("deflated.pt")); });
  EXPECT_NE(read.find("is compressed (zip method 8)"), std::string::npos) << read;
  EXPECT_EQ(read.rfind("h5dcp: record ", 0), 0u) << read;
  test::TempDir dir;
  try {
    torch_save_to_checkpoint(fixture("deflated.pt"), dir.file("d.h5"));
    ADD_FAILURE() << "no error";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("is compressed"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(dir.entries().empty());
}

TEST(ReadTorchSave, ClearErrorsForWhatItDoesNotRead) {
  const auto legacy = message_of<FormatError>([] { read_torch_save(fixture("legacy.pt")); });
  EXPECT_NE(legacy.find("legacy format"), std::string::npos) << legacy;
  EXPECT_NE(legacy.find("torch.save(torch.load("), std::string::npos) << legacy;
  EXPECT_NE(message_of<FormatError>([] { read_torch_save(fixture("tensor.pt")); }).find("not a dict"),
            std::string::npos);
  EXPECT_NE(message_of<FormatError>([] { read_torch_save(fixture("set.pt")); }).find("set"), std::string::npos);
  const auto float4 = message_of<FormatError>([] { read_torch_save(fixture("float4.pt")); });
  EXPECT_NE(float4.find("'c' is a tensor of dtype torch.float4_e2m1fn_x2, which h5dcp cannot store"), std::string::npos)
      << float4;
  EXPECT_NE(message_of<FormatError>([] { read_torch_save(fixture("plain.h5")); }).find("HDF5"), std::string::npos);
  EXPECT_NE(message_of<IoError>([] { read_torch_save(fixture("missing.pt")); }).find("No such file"),
            std::string::npos);
}

TEST(FileKind, FromContent) {
  test::TempDir dir;
  save(StateDict{{"x", at::ones({2})}}, dir.file("c.h5"));
  EXPECT_EQ(detect_file_kind(fixture("matrix.pt")), FileKind::TorchSave);
  EXPECT_EQ(detect_file_kind(fixture("legacy.pt")), FileKind::LegacyTorchSave);
  EXPECT_EQ(detect_file_kind(dir.file("c.h5")), FileKind::H5dcpCheckpoint);
  EXPECT_EQ(detect_file_kind(fixture("plain.h5")), FileKind::Hdf5);
  EXPECT_EQ(detect_file_kind(fixture("text.txt")), FileKind::Other);
  EXPECT_THROW(detect_file_kind(dir.file("missing")), IoError);
  EXPECT_THROW(detect_file_kind(dir.path()), IoError);
}

// Written for the Python check that follows (torch_save.write.check): same
// values, and the same storage sharing, as the original.
TEST(WriteTorchSave, KeepsValuesAndSharing) {
  const auto out = std::getenv("H5DCP_TORCH_SAVE_OUT");
  ASSERT_NE(out, nullptr);
  const auto sd = read_torch_save(fixture("matrix.pt"));
  write_torch_save(sd, std::string(out) + "/written.pt");
  const auto back = read_torch_save(std::string(out) + "/written.pt");
  EXPECT_TRUE(tensor_at(back, "shared/tail").is_alias_of(tensor_at(back, "shared/whole")));
  EXPECT_TRUE(bitwise_equal(tensor_at(back, "views/transposed"), tensor_at(sd, "views/transposed")));
}

TEST(WriteTorchSave, RefusesWhatATorchSaveFileCannotHold) {
  test::TempDir dir;
  const StateDict sharded{{"s", ShardedTensor({4}, {Shard{at::ones({2}), {0}}})}};
  EXPECT_NE(message_of<UsageError>([&] { write_torch_save(sharded, dir.file("a.pt")); }).find("'s' is a ShardedTensor"),
            std::string::npos);
  const StateDict packed{{"c", at::zeros({2}, at::kByte).view(at::kFloat4_e2m1fn_x2)}};
  EXPECT_NE(message_of<UsageError>([&] { write_torch_save(packed, dir.file("b.pt")); }).find("dtype Float4_e2m1fn_x2"),
            std::string::npos);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{});  // nothing left behind
}

TEST(WriteTorchSave, TextThatIsNotUtf8IsRefusedNamingItsKey) {
  test::TempDir dir;
  const StateDict bad_key{{"optim", StateDict{{"lr\xff", 0.1}}}};
  EXPECT_EQ(message_of<UsageError>([&] { write_torch_save(bad_key, dir.file("a.pt")); }),
            "h5dcp: the key 'optim/lr\\xff' is not valid UTF-8, so it cannot be a Python str in a torch.save file");
  const StateDict bad_value{{"meta", StateList{std::string("ok"), std::string("\xfe")}}};
  EXPECT_EQ(message_of<UsageError>([&] { write_torch_save(bad_value, dir.file("b.pt")); }),
            "h5dcp: the string value of 'meta/1' is not valid UTF-8, so it cannot be a Python str in a torch.save "
            "file");
  // A checkpoint may hold such a string (save stores the bytes, verify reports
  // them): converting it names the value too.
  save(StateDict{{"ok", std::string("h\xc3\xa9")}, {"bad", std::string("\xff\xfe")}}, dir.file("u.h5"));
  EXPECT_NE(message_of<UsageError>([&] {
              checkpoint_to_torch_save(dir.file("u.h5"), dir.file("u.pt"));
            }).find("the string value of 'bad' is not valid UTF-8"),
            std::string::npos);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"u.h5"});  // nothing left behind
}

TEST(WriteTorchSave, DifferentDtypesOverOneStorageGetTheirOwn) {
  test::TempDir dir;
  const auto bytes = at::arange(8, at::kByte);
  const StateDict sd{{"a", bytes}, {"b", bytes.view(at::kShort)}, {"c", bytes.narrow(0, 2, 4)}};
  write_torch_save(sd, dir.file("v.pt"));
  const auto back = read_torch_save(dir.file("v.pt"));
  EXPECT_TRUE(bitwise_equal(tensor_at(back, "b"), bytes.view(at::kShort)));
  EXPECT_TRUE(tensor_at(back, "c").is_alias_of(tensor_at(back, "a")));
  EXPECT_FALSE(tensor_at(back, "b").is_alias_of(tensor_at(back, "a")));
}

// --- the checkpoint side -----------------------------------------------------

TEST(CheckpointToTorchSave, StreamsEveryTensorAndValue) {
  test::TempDir dir;
  const auto sd = read_torch_save(fixture("matrix.pt"));
  save(sd, dir.file("m.h5"));
  std::vector<std::string> seen;
  CheckpointToTorchSaveOptions options;
  options.progress = [&](const Progress& p) {
    seen.push_back(p.current);
    EXPECT_EQ(p.items_done, static_cast<std::int64_t>(seen.size()));
    EXPECT_LE(p.bytes_done, p.bytes_total);
  };
  checkpoint_to_torch_save(dir.file("m.h5"), dir.file("m.pt"), options);
  const auto flat = flatten_state_dict(sd);
  const auto back = flatten_state_dict(read_torch_save(dir.file("m.pt")));
  EXPECT_EQ(back.containers, flat.containers);
  std::size_t tensors = 0;
  for (const auto& [fqn, value] : flat.leaves) {
    ASSERT_EQ(back.leaves.count(fqn), 1u) << fqn;
    if (const auto* t = std::get_if<at::Tensor>(&value)) {
      ++tensors;
      EXPECT_TRUE(bitwise_equal(*t, std::get<at::Tensor>(back.leaves.at(fqn)))) << fqn;
    } else if (!std::holds_alternative<double>(value)) {
      EXPECT_EQ(value.index(), back.leaves.at(fqn).index()) << fqn;
    }
  }
  EXPECT_EQ(seen.size(), tensors);
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"m.h5", "m.pt"}));  // no temporary file left
}

TEST(CheckpointToTorchSave, AFullDiskIsAClearErrorAndTheOldFileStays) {
  // A 1 MiB tmpfs (as root, which CI is) holding an earlier export; the new
  // one, 4 MiB, runs out of space inside a streamed record.
  test::TempDir dir;
  const auto small = dir.file("small");
  std::filesystem::create_directory(small);
  ASSERT_EQ(::mount("tmpfs", small.c_str(), "tmpfs", 0, "size=1m"), 0)
      << "mounting a tmpfs needs root (CI runs as root): " << std::strerror(errno);
  struct Unmount {
    std::string path;
    ~Unmount() { ::umount(path.c_str()); }
  } unmount{small};
  const auto old = reference_tensor({64, 64}, at::kFloat);
  save(StateDict{{"w", old}}, dir.file("old.h5"));
  checkpoint_to_torch_save(dir.file("old.h5"), small + "/out.pt");
  save(StateDict{{"w", reference_tensor({1024, 1024}, at::kFloat, 1)}}, dir.file("new.h5"));
  const auto message = message_of<IoError>([&] { checkpoint_to_torch_save(dir.file("new.h5"), small + "/out.pt"); });
  EXPECT_NE(message.find("No space left on device"), std::string::npos) << message;
  EXPECT_NE(message.find(small + "/"), std::string::npos) << message;
  EXPECT_TRUE(bitwise_equal(tensor_at(read_torch_save(small + "/out.pt"), "w"), old));
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(small)) left.push_back(e.path().filename());
  EXPECT_EQ(left, std::vector<std::string>{"out.pt"});  // no temporary file left
}

TEST(CheckpointReader, ReadsBlocksValuesAndMetadata) {
  test::TempDir dir;
  const auto w = reference_tensor({6, 4}, at::kBFloat16);
  save(StateDict{{"w", w}, {"n", std::string("adam")}}, dir.file("r.h5"));
  CheckpointReader reader(dir.file("r.h5"));
  EXPECT_EQ(reader.metadata().world_size, 1);
  EXPECT_TRUE(bitwise_equal(reader.read_tensor("w"), w));
  EXPECT_TRUE(bitwise_equal(reader.read_block("w", {{2, 1}, {3, 2}}), w.narrow(0, 2, 3).narrow(1, 1, 2).contiguous()));
  EXPECT_EQ(std::get<std::string>(reader.value("n")), "adam");
  EXPECT_THROW(reader.read_block("w", {{5, 0}, {2, 4}}), UsageError);
  EXPECT_THROW(reader.value("w"), UsageError);
  reader.close();
  EXPECT_THROW(CheckpointReader(dir.file("none.h5")), FormatError);
}

TEST(Verify, AGoodCheckpointPassesEveryCheck) {
  test::TempDir dir;
  save(read_torch_save(fixture("matrix.pt")), dir.file("g.h5"));
  const auto report = verify_checkpoint(dir.file("g.h5"));
  EXPECT_TRUE(report.ok());
  EXPECT_EQ(report.checks,
            (std::vector<std::string>{"metadata", "structure", "tiling", "data", "checksums", "values"}));
  EXPECT_GT(report.tensors, 20);
  EXPECT_GT(report.bytes_read, 0);
  EXPECT_THROW(verify_checkpoint(dir.file("missing.h5")), IoError);
}

TEST(Verify, TextThatIsNotUtf8IsReported) {
  test::TempDir dir;
  save(StateDict{{"ok", std::string("h\xc3\xa9")}, {"bad", std::string("\xff\xfe")}}, dir.file("u.h5"));
  const auto report = verify_checkpoint(dir.file("u.h5"));
  ASSERT_EQ(report.problems.size(), 1u);
  EXPECT_EQ(report.problems[0].check, "values");
  EXPECT_EQ(report.problems[0].where, "bad");
  EXPECT_EQ(report.values, 2);
}

TEST(Verify, ATruncatedFileIsAProblemNotAnException) {
  test::TempDir dir;
  save(StateDict{{"w", reference_tensor({64, 64}, at::kFloat)}}, dir.file("t.h5"));
  std::filesystem::resize_file(dir.file("t.h5"), std::filesystem::file_size(dir.file("t.h5")) / 2);
  const auto report = verify_checkpoint(dir.file("t.h5"));
  ASSERT_EQ(report.problems.size(), 1u);
  EXPECT_EQ(report.problems[0].check, "metadata");
}

// --- hostile files (issue 15; tests/hostile/make_hostile_pt.py) -------------------

std::string hostile(const std::string& name) {
  const char* dir = std::getenv("H5DCP_HOSTILE_PT");
  if (dir == nullptr)
    ADD_FAILURE() << "H5DCP_HOSTILE_PT is not set (CTest sets it; torch_save.hostile_files writes them)";
  return std::string(dir ? dir : "/nonexistent") + "/" + name;
}

// Under AddressSanitizer every allocation carries redzones and shadow
// memory, and freed blocks wait in a quarantine (256 MiB by default) before
// reuse, so the same work shows a larger peak RSS. The memory bounds below
// hold for the plain build (scripts/test.sh); under ASan (scripts/sanitize.sh)
// they are doubled, still far below what an unbounded reader reaches.
#if defined(__SANITIZE_ADDRESS__)
constexpr long kRssBoundScale = 2;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr long kRssBoundScale = 2;
#else
constexpr long kRssBoundScale = 1;
#endif
#else
constexpr long kRssBoundScale = 1;
#endif

long vm_size_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmSize:", 0) == 0) return std::stol(line.substr(7));
  return 0;
}

struct ChildRun {
  std::string outcome;  // "FormatError: ...", "CheckpointError: ...", "ok", "other: ...", "killed"
  long rss_growth_mib = 0;
};

// Runs `f` in a child process whose address space may grow by `extra_mib`
// at most (so a memory bomb ends there, not on the machine) within 60 s, and
// reports what it threw and how much its peak RSS grew.
template <typename F>
ChildRun in_child(F&& f, long extra_mib) {
  int fds[2];
  if (::pipe(fds) != 0) return {"pipe failed"};
  const long base = vm_size_kib();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    // GNU OpenMP's thread team does not survive fork(): once the parent has
    // run a parallel region (any large tensor op), a parallel op in the
    // child would wait for the team's threads forever.
    at::set_num_threads(1);
    rlimit limit{};
    limit.rlim_cur = limit.rlim_max = static_cast<rlim_t>(base + extra_mib * 1024) * 1024;
    ::setrlimit(RLIMIT_AS, &limit);
    ::alarm(60);
    rusage before{};
    ::getrusage(RUSAGE_SELF, &before);
    std::string outcome;
    try {
      f();
      outcome = "ok";
    } catch (const CheckpointError& e) {
      outcome = std::string("CheckpointError: ") + e.what();
    } catch (const FormatError& e) {
      outcome = std::string("FormatError: ") + e.what();
    } catch (const std::exception& e) {
      outcome = std::string("other: ") + e.what();
    }
    rusage after{};
    ::getrusage(RUSAGE_SELF, &after);
    const auto text = std::to_string((after.ru_maxrss - before.ru_maxrss) / 1024) + "\n" + outcome;
    (void)!::write(fds[1], text.data(), text.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fds[0], buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  const auto newline = text.find('\n');
  if (!WIFEXITED(status) || newline == std::string::npos) return {"killed"};
  return {text.substr(newline + 1), std::stol(text.substr(0, newline))};
}

TEST(HostilePt, EveryRefusedFileIsAFormatErrorInBoundedMemory) {
  const auto dir = hostile("");
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const auto name = entry.path().filename().string();
    if (name.rfind("refuse-", 0) != 0) continue;
    ++files;
    const auto run = in_child([&] { read_torch_save(entry.path().string()); }, 512);
    EXPECT_EQ(run.outcome.rfind("FormatError: h5dcp: ", 0), 0u) << name << ": " << run.outcome;
    EXPECT_NE(run.outcome.find(name), std::string::npos) << name << ": " << run.outcome;
    EXPECT_LT(run.rss_growth_mib, 256 * kRssBoundScale) << name;
  }
  EXPECT_GE(files, 30u);
}

TEST(HostilePt, EachClassIsRefusedForWhatItIs) {
  const std::pair<const char*, const char*> cases[] = {
      {"refuse-shared-dict-bomb.pt", "reached along too many paths"},
      {"refuse-shared-dict-wide.pt", "reached along too many paths"},
      {"refuse-shared-list-str-bomb.pt", "reached along too many paths"},
      {"refuse-deflated-pkl.pt", "record archive/data.pkl of"},
      {"refuse-deflated-storage.pt", "is compressed (zip method 8)"},
      {"refuse-deflated-version.pt", "record archive/version of"},
      {"refuse-huge-memo-index.pt", "memo index 4294967294 is beyond"},
      {"refuse-many-marks.pt", "MARKs are open at once"},
      {"refuse-codecs-amplify.pt", "MiB of memory to read"},
      {"refuse-numel-overflow.pt", "more bytes than a 64-bit size can count"},
      {"refuse-view-numel-overflow.pt", "than a 64-bit size can count"},
      {"refuse-view-bytes-overflow.pt", "than a 64-bit size can count"},
      {"refuse-stride-overflow.pt", "than a 64-bit size can count"},
      {"refuse-offset-huge.pt", "than a 64-bit size can count"},
      {"refuse-too-many-dims.pt", "100 dimensions, more than 64"},
      {"refuse-storage-beyond-record.pt", "has 16 bytes, its storage needs 4000"},
      {"refuse-zip64-entry-count.pt", "claims 1099511627776 records"},
      {"refuse-zip-many-entries.pt", "does not fit in the file"},
      {"refuse-zip-huge-names.pt", "a name of 60008 bytes, more than 4096"},
      {"refuse-truncated-zip.pt", "no zip end record"},
  };
  for (const auto& [name, expected] : cases) {
    const std::string file = hostile(name);  // clang 14 cannot capture a structured binding
    const auto message = message_of<FormatError>([&] { read_torch_save(file); });
    EXPECT_NE(message.find(expected), std::string::npos) << name << ": " << message;
  }
  // A storage whose record is too short was converted from the bytes after it.
  test::TempDir dir;
  const auto run =
      in_child([&] { torch_save_to_checkpoint(hostile("refuse-storage-beyond-record.pt"), dir.file("x.h5")); }, 512);
  EXPECT_NE(run.outcome.find("its storage needs 4000"), std::string::npos) << run.outcome;
}

TEST(HostilePt, PickleMemoryPerOpcodeIsBounded) {
  // {'x': [[], [], ...]}: two million one-byte EMPTY_LISTs. The reader took
  // ~330 bytes per byte; its budget (64 MiB + 128 bytes per byte) refuses it.
  const auto pickle = bytes({0x80, 0x02, '}', 'X', 1, 0, 0, 0, 'x', '('}) + std::string(2'000'000, ']') + "ls.";
  const auto run = in_child([&] { pickle::unpickle(pickle, "lists"); }, 512);
  EXPECT_NE(run.outcome.find("MiB of memory to read"), std::string::npos) << run.outcome;
  EXPECT_LT(run.rss_growth_mib, 400 * kRssBoundScale);
  // A real state dict's pickle takes a small part of the budget.
  StateDict sd;
  for (int i = 0; i < 2000; ++i)
    sd["layer" + std::to_string(i)] =
        StateDict{{"weight", at::ones({4, 4})}, {"bias", at::zeros({4})}, {"step", std::int64_t{i}}};
  pickle::UnpickleStats stats;
  int keys = 0;
  const auto data = pickle::pickle(*detail::pickle_tree(sd, [&](const std::string&, const at::Tensor& t) {
    auto storage = std::make_shared<pickle::Storage>();
    storage->key = std::to_string(keys++);
    storage->dtype = DType::Float32;
    storage->numel = t.numel();
    return pickle::Object::tensor_of({storage, 0, t.sizes().vec(), t.strides().vec()});
  }));
  pickle::unpickle(data, "state", &stats);
  EXPECT_LT(stats.charged_bytes, 32 * data.size()) << stats.charged_bytes << " for " << data.size();
}

TEST(HostilePt, AnExpandedGibibyteConvertsInSlabs) {
  // torch.save of a [1, 1024] row expanded to [262144, 1024]: 4 KiB of
  // storage, 1 GiB of tensor. It was materialised whole.
  test::TempDir dir;
  const auto run =
      in_child([&] { torch_save_to_checkpoint(hostile("accept-expanded-1gib.pt"), dir.file("x.h5")); }, 1024);
  EXPECT_EQ(run.outcome, "ok");
  EXPECT_LT(run.rss_growth_mib, 300 * kRssBoundScale);
  CheckpointReader reader(dir.file("x.h5"));
  const auto rows = reader.read_block("x", ChunkStorageMetadata{{262140, 0}, {4, 1024}});
  EXPECT_TRUE(bitwise_equal(rows, at::arange(1024, at::kFloat).reshape({1, 1024}).expand({4, 1024}).contiguous()));
}

TEST(CheckpointToTorchSave, HoldsOneSlabOfATensorAtATime) {
  // 256 MiB in one tensor: streamed in pieces of 64 MiB, each read through
  // its checksum slabs (1 MiB) and written in turn. Reading the tensor
  // whole, as the export did before, grew the peak RSS by all 256 MiB.
  const auto reference = [] { return at::arange(std::int64_t{1} << 26, at::kInt).reshape({65536, 1024}); };
  test::TempDir dir;
  save(StateDict{{"big", reference()}, {"small", at::ones({3})}}, dir.file("big.h5"));
  const auto run = in_child([&] { checkpoint_to_torch_save(dir.file("big.h5"), dir.file("big.pt")); }, 1024);
  EXPECT_EQ(run.outcome, "ok");
  // Under ASan freed pieces wait in its quarantine (256 MiB by default)
  // before reuse: the bound there is the plain build's plus the quarantine.
  EXPECT_LT(run.rss_growth_mib, 160 + (kRssBoundScale > 1 ? 256 : 0)) << "MiB of RSS growth";
  const auto back = read_torch_save(dir.file("big.pt"));
  EXPECT_TRUE(bitwise_equal(std::get<at::Tensor>(value_at(back, "big")), reference()));
  EXPECT_TRUE(bitwise_equal(std::get<at::Tensor>(value_at(back, "small")), at::ones({3})));
}

}  // namespace
}  // namespace h5dcp

namespace h5dcp {
namespace {

// The exports' source (interop/shared/export_files) closes its HDF5 ids under the
// HDF5 gate, however the export ends: destroyed with a dataset still open
// (an export that threw between reads), it waits while another thread holds
// the gate. The exports used to destroy their reader after giving the gate
// back, which raced an async save's writer in HDF5 (heap corruption, seen in
// mpi.core's ConcurrentReaders).
TEST(ExportSource, ClosesUnderTheHdf5GateHoweverTheExportEnds) {
  test::TempDir dir;
  const auto w = at::arange(600, at::kFloat).reshape({20, 30});
  save(StateDict{{"w", w}, {"step", std::int64_t{4}}}, dir.file("c.h5"));
  for (const bool closed : {false, true}) {
    auto source = std::make_unique<detail::ExportSource>(dir.file("c.h5"));
    std::vector<at::Tensor> pieces;
    source->read_in_pieces("w", {{5, 0}, {10, 30}}, [&](const ChunkStorageMetadata& box, const at::Tensor& piece) {
      EXPECT_EQ(box.offsets, (detail::Shape{5, 0}));
      EXPECT_EQ(box.sizes, (detail::Shape{10, 30}));
      pieces.push_back(piece);
    });
    ASSERT_EQ(pieces.size(), 1u);
    EXPECT_TRUE(bitwise_equal(pieces[0], w.narrow(0, 5, 10)));
    if (closed) {
      source->close();
      source.reset();  // nothing left to close: no wait for the gate
      continue;
    }
    auto hold = std::make_unique<detail::Hdf5GateHold>();
    auto destroyed = std::async(std::launch::async, [&] { source.reset(); });
    EXPECT_EQ(destroyed.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout)
        << "the source closed its HDF5 ids while another thread held the gate";
    hold.reset();
    EXPECT_EQ(destroyed.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  }
}

}  // namespace
}  // namespace h5dcp
