#include "plan/codec.hpp"

namespace h5dcp::detail {
namespace {

void put(ByteWriter& w, const ChunkStorageMetadata& c) {
  w.put_ints(c.offsets);
  w.put_ints(c.sizes);
}

ChunkStorageMetadata get_chunk(ByteReader& r) {
  ChunkStorageMetadata c;
  c.offsets = r.get_ints();
  c.sizes = r.get_ints();
  return c;
}

template <typename Enum>
Enum get_enum(ByteReader& r, Enum last, const char* what) {
  const auto raw = r.get<std::uint8_t>();
  if (raw > static_cast<std::uint8_t>(last)) throw Error(std::string("h5dcp: corrupt message (") + what + ")");
  return static_cast<Enum>(raw);
}

DType get_dtype(ByteReader& r) { return get_enum(r, kLastDType, "dtype"); }

void put(ByteWriter& w, const std::vector<std::pair<std::string, ContainerKind>>& containers) {
  w.put<std::uint64_t>(containers.size());
  for (const auto& [fqn, kind] : containers) {
    w.put_string(fqn);
    w.put<std::uint8_t>(static_cast<std::uint8_t>(kind));
  }
}

std::vector<std::pair<std::string, ContainerKind>> get_containers(ByteReader& r) {
  std::vector<std::pair<std::string, ContainerKind>> out;
  for (auto n = r.get_count(); n > 0; --n) {
    auto fqn = r.get_string();
    out.emplace_back(std::move(fqn), get_enum(r, ContainerKind::List, "container"));
  }
  return out;
}

void finish(const ByteReader& r) {
  if (!r.done()) throw Error("h5dcp: corrupt message (trailing bytes)");
}

void put_metadata(ByteWriter& w, const Metadata& metadata) {
  w.put<std::int32_t>(metadata.format_version_major);
  w.put<std::int32_t>(metadata.format_version_minor);
  w.put_string(metadata.library_version);
  w.put<std::int32_t>(metadata.world_size);
  w.put_string(metadata.created);
  w.put<std::uint64_t>(metadata.state_dict_metadata.size());
  for (const auto& [fqn, storage] : metadata.state_dict_metadata) {
    w.put_string(fqn);
    if (const auto* t = std::get_if<TensorStorageMetadata>(&storage)) {
      w.put<std::uint8_t>(0);
      w.put<std::uint8_t>(static_cast<std::uint8_t>(t->properties.dtype));
      w.put_ints(t->size);
      w.put<std::uint64_t>(t->chunks.size());
      for (const auto& c : t->chunks) put(w, c);
    } else {
      const auto& b = std::get<BytesStorageMetadata>(storage);
      w.put<std::uint8_t>(1);
      w.put_string(b.encoding);
      w.put<std::int64_t>(b.size);
    }
  }
  put(w, std::vector<std::pair<std::string, ContainerKind>>(metadata.containers.begin(), metadata.containers.end()));
}

Metadata get_metadata(ByteReader& r) {
  Metadata md;
  md.format_version_major = r.get<std::int32_t>();
  md.format_version_minor = r.get<std::int32_t>();
  md.library_version = r.get_string();
  md.world_size = r.get<std::int32_t>();
  md.created = r.get_string();
  for (auto n = r.get_count(); n > 0; --n) {
    auto fqn = r.get_string();
    if (r.get<std::uint8_t>() == 0) {
      TensorStorageMetadata t;
      t.properties.dtype = get_dtype(r);
      t.size = r.get_ints();
      for (auto m = r.get_count(); m > 0; --m) t.chunks.push_back(get_chunk(r));
      md.state_dict_metadata.emplace(std::move(fqn), std::move(t));
    } else {
      BytesStorageMetadata b;
      b.encoding = r.get_string();
      b.size = r.get<std::int64_t>();
      md.state_dict_metadata.emplace(std::move(fqn), std::move(b));
    }
  }
  for (auto& [fqn, kind] : get_containers(r)) md.containers.emplace(std::move(fqn), kind);
  return md;
}

}  // namespace

Bytes encode(const SavePlan& plan) {
  ByteWriter w;
  w.put<std::uint64_t>(plan.items.size());
  for (const auto& item : plan.items) {
    w.put_string(item.index.fqn);
    w.put<std::uint8_t>(item.index.index.has_value());
    w.put<std::uint64_t>(item.index.index.value_or(0));
    w.put<std::uint8_t>(static_cast<std::uint8_t>(item.type));
    w.put<std::uint8_t>(static_cast<std::uint8_t>(item.dtype));
    w.put_ints(item.global_shape);
    put(w, item.chunk);
    w.put_string(item.encoding);
    w.put_string(item.payload);
  }
  put(w, plan.containers);
  return w.take();
}

SavePlan decode_save_plan(std::string_view bytes) {
  ByteReader r(bytes);
  SavePlan plan;
  for (auto n = r.get_count(); n > 0; --n) {
    WriteItem item;
    item.index.fqn = r.get_string();
    const bool has_index = r.get<std::uint8_t>() != 0;
    const auto index = r.get<std::uint64_t>();
    if (has_index) item.index.index = static_cast<std::size_t>(index);
    item.type = get_enum(r, WriteItemType::Value, "item type");
    item.dtype = get_dtype(r);
    item.global_shape = r.get_ints();
    item.chunk = get_chunk(r);
    item.encoding = r.get_string();
    item.payload = r.get_string();
    if (item.type == WriteItemType::Shard) item.index.offset = item.chunk.offsets;
    plan.items.push_back(std::move(item));
  }
  plan.containers = get_containers(r);
  finish(r);
  return plan;
}

Bytes encode(const GlobalSavePlan& plan) {
  ByteWriter w;
  w.put_string(plan.temp_path);
  w.put_string(plan.created);
  w.put<std::int32_t>(plan.world_size);
  put(w, plan.containers);
  w.put<std::uint64_t>(plan.tensors.size());
  for (const auto& t : plan.tensors) {
    w.put_string(t.fqn);
    w.put<std::uint8_t>(static_cast<std::uint8_t>(t.dtype));
    w.put_ints(t.global_shape);
    w.put<std::uint8_t>(t.sharded);
    w.put<std::uint64_t>(t.chunks.size());
    for (const auto& c : t.chunks) {
      put(w, c.chunk);
      w.put<std::int32_t>(c.writer);
      w.put<std::uint64_t>(c.writer_shard_index);
    }
  }
  w.put<std::uint64_t>(plan.values.size());
  for (const auto& v : plan.values) {
    w.put_string(v.fqn);
    w.put_string(v.encoding);
    w.put_string(v.payload);
    w.put<std::int32_t>(v.writer);
  }
  return w.take();
}

GlobalSavePlan decode_global_save_plan(std::string_view bytes) {
  ByteReader r(bytes);
  GlobalSavePlan plan;
  plan.temp_path = r.get_string();
  plan.created = r.get_string();
  plan.world_size = r.get<std::int32_t>();
  plan.containers = get_containers(r);
  for (auto n = r.get_count(); n > 0; --n) {
    PlannedTensor t;
    t.fqn = r.get_string();
    t.dtype = get_dtype(r);
    t.global_shape = r.get_ints();
    t.sharded = r.get<std::uint8_t>() != 0;
    for (auto m = r.get_count(); m > 0; --m) {
      PlannedChunk c;
      c.chunk = get_chunk(r);
      c.writer = r.get<std::int32_t>();
      c.writer_shard_index = static_cast<std::size_t>(r.get<std::uint64_t>());
      t.chunks.push_back(std::move(c));
    }
    plan.tensors.push_back(std::move(t));
  }
  for (auto n = r.get_count(); n > 0; --n) {
    PlannedValue v;
    v.fqn = r.get_string();
    v.encoding = r.get_string();
    v.payload = r.get_string();
    v.writer = r.get<std::int32_t>();
    plan.values.push_back(std::move(v));
  }
  finish(r);
  return plan;
}

Bytes encode(const Metadata& metadata) {
  ByteWriter w;
  put_metadata(w, metadata);
  return w.take();
}

Metadata decode_metadata(std::string_view bytes) {
  ByteReader r(bytes);
  auto md = get_metadata(r);
  finish(r);
  return md;
}

namespace {

void put_digests(ByteWriter& w, const std::vector<std::uint64_t>& digests) {
  w.put<std::uint64_t>(digests.size());
  for (auto d : digests) w.put<std::uint64_t>(d);
}

std::vector<std::uint64_t> get_digests(ByteReader& r) {
  std::vector<std::uint64_t> digests(r.get_count(sizeof(std::uint64_t)));
  for (auto& d : digests) d = r.get<std::uint64_t>();
  return digests;
}

}  // namespace

Bytes encode(const std::vector<ChunkChecksums>& checksums) {
  ByteWriter w;
  w.put<std::uint64_t>(checksums.size());
  for (const auto& c : checksums) {
    w.put<std::uint32_t>(c.tensor);
    w.put<std::uint32_t>(c.chunk);
    w.put<std::int64_t>(c.rows);
    put_digests(w, c.digests);
  }
  return w.take();
}

std::vector<ChunkChecksums> decode_chunk_checksums(std::string_view bytes) {
  ByteReader r(bytes);
  std::vector<ChunkChecksums> out;
  for (auto n = r.get_count(); n > 0; --n) {
    ChunkChecksums c;
    c.tensor = r.get<std::uint32_t>();
    c.chunk = r.get<std::uint32_t>();
    c.rows = r.get<std::int64_t>();
    c.digests = get_digests(r);
    out.push_back(std::move(c));
  }
  finish(r);
  return out;
}

Bytes encode(const CheckpointIndex& index) {
  ByteWriter w;
  put_metadata(w, index.metadata);
  w.put<std::uint64_t>(index.values.size());
  for (const auto& [fqn, payload] : index.values) {
    w.put_string(fqn);
    w.put_string(payload);
  }
  w.put<std::uint64_t>(index.checksums.size());
  for (const auto& [fqn, c] : index.checksums) {
    w.put_string(fqn);
    w.put_ints(c.rows);
    put_digests(w, c.digests);
  }
  return w.take();
}

CheckpointIndex decode_checkpoint_index(std::string_view bytes) {
  ByteReader r(bytes);
  CheckpointIndex index;
  index.metadata = get_metadata(r);
  for (auto n = r.get_count(); n > 0; --n) {
    auto fqn = r.get_string();
    index.values.emplace(std::move(fqn), r.get_string());
  }
  for (auto n = r.get_count(); n > 0; --n) {
    auto fqn = r.get_string();
    TensorChecksums c;
    c.rows = r.get_ints();
    c.digests = get_digests(r);
    index.checksums.emplace(std::move(fqn), std::move(c));
  }
  finish(r);
  return index;
}

}  // namespace h5dcp::detail
