#include "plan/codec.hpp"

namespace h5dcp {
namespace detail {
template <>
struct LastEnumerator<WriteItemType> {
  static constexpr WriteItemType value = WriteItemType::Value;
};
}  // namespace detail

H5DCP_MESSAGE_FIELDS(TensorStorageMetadata, m.properties.dtype, m.size, m.chunks);
H5DCP_MESSAGE_FIELDS(BytesStorageMetadata, m.encoding, m.size);
H5DCP_MESSAGE_FIELDS(Metadata, m.format_version_major, m.format_version_minor, m.library_version, m.world_size,
                     m.created, m.state_dict_metadata, m.containers);
// A write item's offset is its chunk's (set when decoded), its index a hint.
H5DCP_MESSAGE_FIELDS(WriteItem, m.index.fqn, m.index.index, m.type, m.dtype, m.global_shape, m.chunk, m.encoding,
                     m.payload);
H5DCP_MESSAGE_FIELDS(SavePlan, m.items, m.containers);
H5DCP_MESSAGE_FIELDS(PlannedChunk, m.chunk, m.writer, m.writer_shard_index);
H5DCP_MESSAGE_FIELDS(PlannedTensor, m.fqn, m.dtype, m.global_shape, m.sharded, m.chunks);
H5DCP_MESSAGE_FIELDS(PlannedValue, m.fqn, m.encoding, m.payload, m.writer);
H5DCP_MESSAGE_FIELDS(GlobalSavePlan, m.temp_path, m.created, m.world_size, m.containers, m.tensors, m.values);
H5DCP_MESSAGE_FIELDS(detail::ChunkChecksums, m.tensor, m.chunk, m.rows, m.digests);
H5DCP_MESSAGE_FIELDS(detail::TensorChecksums, m.rows, m.digests);
H5DCP_MESSAGE_FIELDS(detail::CheckpointIndex, m.metadata, m.values, m.checksums);

namespace detail {

Bytes encode(const SavePlan& plan) { return encode_message(plan); }

SavePlan decode_save_plan(std::string_view bytes) {
  auto plan = ByteReader::decode<SavePlan>(bytes);
  for (auto& item : plan.items)
    if (item.type == WriteItemType::Shard) item.index.offset = item.chunk.offsets;
  return plan;
}

Bytes encode(const GlobalSavePlan& plan) { return encode_message(plan); }
GlobalSavePlan decode_global_save_plan(std::string_view bytes) { return ByteReader::decode<GlobalSavePlan>(bytes); }

Bytes encode(const Metadata& metadata) { return encode_message(metadata); }
Metadata decode_metadata(std::string_view bytes) { return ByteReader::decode<Metadata>(bytes); }

Bytes encode(const std::vector<ChunkChecksums>& checksums) { return encode_message(checksums); }
std::vector<ChunkChecksums> decode_chunk_checksums(std::string_view bytes) {
  return ByteReader::decode<std::vector<ChunkChecksums>>(bytes);
}

Bytes encode(const CheckpointIndex& index) { return encode_message(index); }
CheckpointIndex decode_checkpoint_index(std::string_view bytes) { return ByteReader::decode<CheckpointIndex>(bytes); }

}  // namespace detail
}  // namespace h5dcp
