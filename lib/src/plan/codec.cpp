#include "plan/codec.hpp"

namespace h5dcp::detail {
namespace {

void put_chunk(ByteWriter& w, const ChunkStorageMetadata& c) {
  w.put_ints(c.offsets);
  w.put_ints(c.sizes);
}

ChunkStorageMetadata get_chunk(ByteReader& r) {
  ChunkStorageMetadata c;
  c.offsets = r.get_ints();
  c.sizes = r.get_ints();
  return c;
}

DType get_dtype(ByteReader& r) {
  const auto raw = r.get<std::uint8_t>();
  if (raw > static_cast<std::uint8_t>(DType::Bool)) throw Error("h5dcp: corrupt message (dtype)");
  return static_cast<DType>(raw);
}

void finish(const ByteReader& r) {
  if (!r.done()) throw Error("h5dcp: corrupt message (trailing bytes)");
}

}  // namespace

Bytes encode(const SavePlan& plan) {
  ByteWriter w;
  w.put<std::uint64_t>(plan.items.size());
  for (const auto& item : plan.items) {
    w.put_string(item.index.fqn);
    w.put<std::uint8_t>(item.index.index.has_value());
    w.put<std::uint64_t>(item.index.index.value_or(0));
    w.put<std::uint8_t>(static_cast<std::uint8_t>(item.dtype));
    w.put_ints(item.global_shape);
    put_chunk(w, item.chunk);
    w.put<std::uint8_t>(item.sharded);
  }
  return w.take();
}

SavePlan decode_save_plan(std::string_view bytes) {
  ByteReader r(bytes);
  SavePlan plan;
  for (auto n = r.get<std::uint64_t>(); n > 0; --n) {
    WriteItem item;
    item.index.fqn = r.get_string();
    const bool has_index = r.get<std::uint8_t>() != 0;
    const auto index = r.get<std::uint64_t>();
    if (has_index) item.index.index = static_cast<std::size_t>(index);
    item.dtype = get_dtype(r);
    item.global_shape = r.get_ints();
    item.chunk = get_chunk(r);
    item.sharded = r.get<std::uint8_t>() != 0;
    if (item.sharded) item.index.offset = item.chunk.offsets;
    plan.items.push_back(std::move(item));
  }
  finish(r);
  return plan;
}

Bytes encode(const GlobalSavePlan& plan) {
  ByteWriter w;
  w.put_string(plan.temp_path);
  w.put_string(plan.created);
  w.put<std::int32_t>(plan.world_size);
  w.put<std::uint64_t>(plan.tensors.size());
  for (const auto& t : plan.tensors) {
    w.put_string(t.fqn);
    w.put<std::uint8_t>(static_cast<std::uint8_t>(t.dtype));
    w.put_ints(t.global_shape);
    w.put<std::uint8_t>(t.sharded);
    w.put<std::uint64_t>(t.chunks.size());
    for (const auto& c : t.chunks) {
      put_chunk(w, c.chunk);
      w.put<std::int32_t>(c.writer);
      w.put<std::uint64_t>(c.writer_shard_index);
    }
  }
  return w.take();
}

GlobalSavePlan decode_global_save_plan(std::string_view bytes) {
  ByteReader r(bytes);
  GlobalSavePlan plan;
  plan.temp_path = r.get_string();
  plan.created = r.get_string();
  plan.world_size = r.get<std::int32_t>();
  for (auto n = r.get<std::uint64_t>(); n > 0; --n) {
    PlannedTensor t;
    t.fqn = r.get_string();
    t.dtype = get_dtype(r);
    t.global_shape = r.get_ints();
    t.sharded = r.get<std::uint8_t>() != 0;
    for (auto m = r.get<std::uint64_t>(); m > 0; --m) {
      PlannedChunk c;
      c.chunk = get_chunk(r);
      c.writer = r.get<std::int32_t>();
      c.writer_shard_index = static_cast<std::size_t>(r.get<std::uint64_t>());
      t.chunks.push_back(std::move(c));
    }
    plan.tensors.push_back(std::move(t));
  }
  finish(r);
  return plan;
}

Bytes encode(const Metadata& metadata) {
  ByteWriter w;
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
      for (const auto& c : t->chunks) put_chunk(w, c);
    } else {
      w.put<std::uint8_t>(1);
      w.put_string(std::get<BytesStorageMetadata>(storage).encoding);
    }
  }
  return w.take();
}

Metadata decode_metadata(std::string_view bytes) {
  ByteReader r(bytes);
  Metadata md;
  md.format_version_major = r.get<std::int32_t>();
  md.format_version_minor = r.get<std::int32_t>();
  md.library_version = r.get_string();
  md.world_size = r.get<std::int32_t>();
  md.created = r.get_string();
  for (auto n = r.get<std::uint64_t>(); n > 0; --n) {
    auto fqn = r.get_string();
    if (r.get<std::uint8_t>() == 0) {
      TensorStorageMetadata t;
      t.properties.dtype = get_dtype(r);
      t.size = r.get_ints();
      for (auto m = r.get<std::uint64_t>(); m > 0; --m) t.chunks.push_back(get_chunk(r));
      md.state_dict_metadata.emplace(std::move(fqn), std::move(t));
    } else {
      md.state_dict_metadata.emplace(std::move(fqn), BytesStorageMetadata{r.get_string()});
    }
  }
  finish(r);
  return md;
}

}  // namespace h5dcp::detail
