#include "api/local_load.hpp"

#include <ATen/core/Tensor.h>
#include <ATen/ops/from_blob.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <utility>
#include <variant>

#include "api/local_save.hpp"
#include "api/stateful_expansion.hpp"
#include "api/verified_read.hpp"
#include "base/byte_codec.hpp"
#include "h5dcp/error.hpp"
#include "h5dcp/planner.hpp"
#include "hdf5/container_reader.hpp"
#include "hdf5/local_file.hpp"
#include "plan/chunk_geometry.hpp"
#include "plan/codec.hpp"
#include "storage/checkpoint_directory.hpp"
#include "torch/dtype_mapping.hpp"
#include "torch/tensor_blocks.hpp"
#include "torch/value_codec.hpp"

namespace h5dcp {
H5DCP_MESSAGE_FIELDS(detail::LocalCopyReport, m.owner_rank, m.file, m.intact, m.problem);
H5DCP_MESSAGE_FIELDS(detail::LocalStepReport, m.step, m.run_id, m.rank_nodes, m.copies);
H5DCP_MESSAGE_FIELDS(detail::SurvivingNodeReport, m.node, m.steps);
namespace detail {
namespace {

// A saved chunk: a tensor's fqn and the chunk's index in its metadata.
using ChunkKey = std::pair<std::string, std::int64_t>;

// Chunk `k` of `storage` (a 0-d tensor's one chunk is the scalar).
ChunkStorageMetadata chunk_box(const TensorStorageMetadata& storage, std::int64_t k) {
  if (storage.chunks.empty()) return ChunkStorageMetadata{};
  return storage.chunks.at(static_cast<std::size_t>(k));
}

const TensorStorageMetadata& tensor_storage(const CheckpointIndex& index, const std::string& fqn) {
  const auto found = index.metadata.state_dict_metadata.find(fqn);
  if (found == index.metadata.state_dict_metadata.end() ||
      !std::holds_alternative<TensorStorageMetadata>(found->second))
    throw FormatError("h5dcp: the local copies hold no tensor '" + fqn + "'");
  return std::get<TensorStorageMetadata>(found->second);
}

// The bytes of chunk `k` of `fqn` (a 0-d tensor's one chunk: its scalar).
std::size_t chunk_bytes(const CheckpointIndex& index, const ChunkKey& key) {
  const auto& storage = tensor_storage(index, key.first);
  return static_cast<std::size_t>(volume(chunk_box(storage, key.second).sizes)) * dtype_size(storage.properties.dtype);
}

// Where each of `keys` lies in the payload that carries them from the rank
// that serves them to the rank that asked, in order, each at a multiple of
// kChunkAlign so that the receiver uses it where it lies (any dtype aligned);
// the last entry is the payload's size. Both sides compute it.
constexpr std::size_t kChunkAlign = 64;
std::vector<std::size_t> payload_layout(const CheckpointIndex& index, const std::vector<ChunkKey>& keys) {
  std::vector<std::size_t> at{0};
  at.reserve(keys.size() + 1);
  for (const auto& key : keys) {
    const auto end = at.back() + chunk_bytes(index, key);
    at.push_back((end + kChunkAlign - 1) / kChunkAlign * kChunkAlign);
  }
  return at;
}

// Chunk `k` of `fqn` as a tensor over `place` (its memory, not owned).
at::Tensor chunk_at(const CheckpointIndex& index, const ChunkKey& key, void* place) {
  const auto& storage = tensor_storage(index, key.first);
  return at::from_blob(place, chunk_box(storage, key.second).sizes,
                       at::TensorOptions().dtype(to_scalar_type(storage.properties.dtype)));
}

// The checksums of `fqn` in the step's index, for a read of the copy at
// `file`. read_local_copy_index refuses a copy without them, so the index
// (one surveyed copy's) has them; this keeps either read from using a block
// it cannot verify should that change.
const TensorChecksums& copy_checksums(const CheckpointIndex& index, const std::string& fqn, const std::string& file) {
  const auto sums = index.checksums.find(fqn);
  if (sums == index.checksums.end()) throw FormatError("h5dcp: '" + file + "' holds no checksums for '" + fqn + "'");
  return sums->second;
}

// Reads chunk `k` of `fqn` from `reader` (the copy at `file`) into `place`,
// every checksum slab verified.
void read_chunk(ContainerReader& reader, const std::string& file, const CheckpointIndex& index, const ChunkKey& key,
                void* place) {
  const auto& [fqn, k] = key;
  const auto& storage = tensor_storage(index, fqn);
  const auto box = chunk_box(storage, k);
  if (volume(box.sizes) == 0) return;
  const auto& sums = copy_checksums(index, fqn, file);
  ReadItem item;
  item.storage_fqn = fqn;
  item.storage_offsets = box.offsets;
  item.dest_offsets.assign(box.offsets.size(), 0);
  item.lengths = box.sizes;
  item.dtype = storage.properties.dtype;
  item.source_chunks = {static_cast<std::size_t>(k)};
  read_verified(reader, item, chunk_at(index, key, place), storage, sums);
}

// The problem of the copy at `path` whose identity is `identity`, or
// std::nullopt when it can serve: its index (metadata, values, checksums)
// and its chunks' owners read. Its blocks are not: a recovery reads, and
// verifies, only the blocks its ranks ask for, when it loads them
// (load_from_local_copies), and nothing of a copy it does not use.
std::optional<std::string> check_copy(const std::string& path, const LocalFileIdentity& identity) {
  try {
    (void)read_local_copy_index(path, static_cast<std::int64_t>(identity.rank_node.size()));
    return std::nullopt;
  } catch (const std::exception& e) {
    return std::string(e.what());
  }
}

// The owner rank a copy's file name gives (local_copy_name), or -1.
int owner_of_name(const std::string& name) {
  for (int digits = 5; digits <= 9; ++digits) {
    if (name.size() != 5 + static_cast<std::size_t>(digits) + 3) continue;
    const auto number = name.substr(5, static_cast<std::size_t>(digits));
    if (!std::all_of(number.begin(), number.end(), [](char c) { return c >= '0' && c <= '9'; })) return -1;
    const int owner = std::stoi(number);
    return local_copy_name(owner) == name ? owner : -1;
  }
  return -1;
}

}  // namespace

SurvivingNodeReport survey_local_copies(const std::string& node, const std::vector<LocalStepDirectory>& steps) {
  SurvivingNodeReport report{node, {}};
  for (const auto& [step, directory] : steps) {
    LocalStepReport step_report;
    step_report.step = step;
    bool identified = false;
    std::vector<std::string> names;
    try {
      names = list_names(directory);
    } catch (const std::exception&) {
      continue;  // gone meanwhile: nothing of it survives here
    }
    for (const auto& name : names) {
      const int owner = owner_of_name(name);
      if (owner < 0) continue;
      auto path = directory;
      path.append("/").append(name);
      // The identity first: a copy whose blocks are damaged still says
      // which run and job it is of.
      std::optional<LocalFileIdentity> identity;
      std::optional<std::string> problem;
      try {
        identity = read_local_identity(path);
      } catch (const std::exception& e) {
        problem = e.what();
      }
      if (identity && (identity->step != step || identity->owner_rank != owner))
        problem = "it says it is step " + std::to_string(identity->step) + " of rank " +
                  std::to_string(identity->owner_rank) + ", not what its name says";
      else if (identity && identified && identity->run_id != step_report.run_id)
        problem = "its run identity '" + identity->run_id + "' differs from its step's other copies'";
      else if (identity && !identified) {
        identified = true;
        step_report.run_id = identity->run_id;
        for (const auto n : identity->rank_node)
          step_report.rank_nodes.push_back(identity->nodes.at(static_cast<std::size_t>(n)));
      }
      if (!problem) problem = check_copy(path, *identity);
      step_report.copies.push_back(LocalCopyReport{owner, path, !problem, problem.value_or("")});
    }
    if (!step_report.copies.empty()) report.steps.push_back(std::move(step_report));
  }
  return report;
}

std::vector<SurvivingNodeReport> gather_node_reports(
    const Comm& comm, const std::function<std::optional<SurvivingNodeReport>()>& survey) {
  const auto all = comm.all_gather("local:survey", [&] {
    const auto mine = survey();
    return mine ? encode_message(*mine) : Bytes();
  });
  std::vector<SurvivingNodeReport> reports;
  for (const auto& b : all)
    if (!b.empty()) reports.push_back(ByteReader::decode<SurvivingNodeReport>(b));
  return reports;
}

LocalRecoveryResult load_from_local_copies(const Comm& c, StateDict& state, const LoadOptions& options,
                                           const LocalRecoverySources& sources) {
  LocalRecoveryCounts counts;
  const auto owner_count = sources.server.size();
  if (owner_count == 0 || sources.files.size() != owner_count || sources.here.size() != owner_count)
    throw UsageError("h5dcp: a local recovery needs a server, a file and a place for every owner rank");
  // The step's index (metadata, values, checksums) and which rank saved
  // each chunk, from one copy: every copy carries them whole.
  const auto indexed = c.all_gather("local:index", [&] {
    if (sources.server.at(0) != c.rank()) return Bytes();
    const auto copy = read_local_copy_index(sources.files[0], static_cast<std::int64_t>(owner_count));
    return encode_message(std::pair(encode(copy.index), copy.owners));
  });
  const auto indexed_step =
      ByteReader::decode<std::pair<Bytes, ChunkOwners>>(indexed.at(static_cast<std::size_t>(sources.server[0])));
  const auto index = decode_checkpoint_index(indexed_step.first);
  const auto& owners = indexed_step.second;

  DefaultLoadPlanner default_planner(options.strict, options.convert_dtype);
  LoadPlanner& planner = options.planner != nullptr ? *options.planner : default_planner;
  LoadExpansion expansion;
  const bool expand = has_stateful(state);
  if (expand)
    c.all_gather("load:expand", [&] {
      expansion = expand_for_load(state, index.metadata);
      return Bytes();
    });
  StateDict& target = expand ? expansion.target : state;
  std::optional<LoadPlan> plan;
  c.all_gather("local:plan", [&] {
    planner.set_up(target, index.metadata, c.is_coordinator());
    plan = planner.create_local_plan();
    return Bytes();
  });

  // The saved chunks this rank's reads overlap, asked of their servers.
  std::vector<std::vector<ChunkKey>> wanted(static_cast<std::size_t>(c.size()));
  std::set<ChunkKey> asked;
  for (const auto& item : plan->items) {
    if (item.type != ReadItemType::Tensor) continue;
    std::vector<std::size_t> chunks = item.source_chunks;
    if (chunks.empty()) chunks.push_back(0);
    for (const auto k : chunks) {
      ChunkKey key{item.storage_fqn, static_cast<std::int64_t>(k)};
      if (!asked.insert(key).second) continue;
      const auto owner = owners.at(item.storage_fqn).at(k);
      if (sources.here.at(static_cast<std::size_t>(owner))) continue;  // read in place in local:read
      wanted.at(static_cast<std::size_t>(sources.server.at(static_cast<std::size_t>(owner)))).push_back(key);
    }
  }
  const auto requests = c.exchange("local:request", [&] {
    std::vector<Bytes> out(wanted.size());
    for (std::size_t s = 0; s < wanted.size(); ++s)
      if (!wanted[s].empty()) out[s] = encode_message(wanted[s]);
    return out;
  });
  // A copy that cannot be read (a checksum differs, the file is cut short)
  // is not an error here: it is reported to every rank, nothing is loaded,
  // and the caller chooses again without it (a replica, an older step).
  std::map<int, std::string> damaged;
  const auto served = c.exchange("local:serve", [&] {
    std::vector<Bytes> out(requests.size());
    std::map<std::string, ContainerReader> readers;
    std::map<ChunkKey, const char*> read;  // a chunk several ranks ask for is read once, then copied
    for (std::size_t r = 0; r < requests.size(); ++r) {
      if (requests[r].empty()) continue;
      const auto keys = ByteReader::decode<std::vector<ChunkKey>>(requests[r]);
      const auto at = payload_layout(index, keys);
      out[r].resize(at.back());  // read into where they are sent from
      for (std::size_t i = 0; i < keys.size(); ++i) {
        const auto& [fqn, k] = keys[i];
        const auto owner = static_cast<std::size_t>(owners.at(fqn).at(static_cast<std::size_t>(k)));
        if (sources.server.at(owner) != c.rank())
          throw Error("h5dcp: rank " + std::to_string(r) + " asked this rank for a chunk of '" + fqn +
                      "' that another rank serves");
        if (damaged.count(static_cast<int>(owner)) != 0) continue;
        char* place = out[r].data() + at[i];
        const auto bytes = chunk_bytes(index, keys[i]);
        if (const auto first = read.find(keys[i]); first != read.end()) {
          std::memcpy(place, first->second, bytes);
          continue;
        }
        const auto& file = sources.files.at(owner);
        try {
          auto reader = readers.find(file);
          if (reader == readers.end()) reader = readers.try_emplace(file, file, MPI_COMM_NULL).first;
          read_chunk(reader->second, file, index, keys[i], place);
        } catch (const std::exception& e) {
          damaged.emplace(static_cast<int>(owner), e.what());
          if (const auto open = readers.find(file); open != readers.end()) {
            try {
              open->second.close();
            } catch (const std::exception&) {
              // Damaged already: what its close says adds nothing.
            }
            readers.erase(open);
          }
          continue;
        }
        read.emplace(keys[i], place);
        counts.bytes_read += static_cast<std::int64_t>(bytes);
      }
    }
    for (auto& [file, reader] : readers) reader.close();
    return out;
  });
  LocalRecoveryResult result;
  for (const auto& theirs : c.all_gather("local:check", [&] { return encode_message(damaged); }))
    for (auto& [owner, problem] : ByteReader::decode<std::map<int, std::string>>(theirs))
      result.damaged.emplace(owner, std::move(problem));
  if (!result.damaged.empty()) return result;  // nothing loaded: the state is as it was
  // The chunks where they arrived (`served` outlives their use below).
  std::map<ChunkKey, at::Tensor> chunks;
  for (std::size_t s = 0; s < wanted.size(); ++s) {
    if (wanted[s].empty()) continue;
    const auto at = payload_layout(index, wanted[s]);
    if (served[s].size() != at.back())
      throw CheckpointError("local:serve",
                            {{c.rank(), "rank " + std::to_string(s) + " sent " + std::to_string(served[s].size()) +
                                            " bytes, not " + std::to_string(at.back())}});
    for (std::size_t i = 0; i < wanted[s].size(); ++i) {
      // Only read from (the source of copy_ below): the const_cast gives from_blob its pointer type.
      chunks.emplace(wanted[s][i], chunk_at(index, wanted[s][i], const_cast<char*>(served[s].data()) + at[i]));
      counts.bytes_received += static_cast<std::int64_t>(chunk_bytes(index, wanted[s][i]));
    }
  }

  // Copies on this rank's node, read straight into the blocks.
  std::map<std::size_t, ContainerReader> in_place;  // by owner rank
  std::map<int, std::string> damaged_here;
  // `part` of chunk `k` (of copy `owner`), which `item` wants, read into its
  // place in `dest` with its slabs verified. A copy that cannot be read is
  // reported, as in local:serve; the state is written already.
  const auto read_in_place = [&](const ReadItem& item, const ChunkStorageMetadata& part, const at::Tensor& dest,
                                 const TensorStorageMetadata& storage, std::size_t k, std::size_t owner) {
    ReadItem piece = item;
    piece.source_chunks = {k};
    piece.storage_offsets = part.offsets;
    piece.lengths = part.sizes;
    const auto within = minus(part.offsets, item.storage_offsets);
    for (std::size_t d = 0; d < within.size(); ++d) piece.dest_offsets[d] += within[d];
    auto into = dest_block(dest, piece);  // outside the try: a wrong block is this rank's bug, not the copy's
    const auto& file = sources.files.at(owner);
    try {
      auto reader = in_place.find(owner);
      if (reader == in_place.end()) reader = in_place.try_emplace(owner, file, MPI_COMM_NULL).first;
      read_verified(reader->second, piece, into, storage, copy_checksums(index, item.storage_fqn, file));
      counts.bytes_read += volume(part.sizes) * static_cast<std::int64_t>(dtype_size(storage.properties.dtype));
    } catch (const std::exception& e) {
      damaged_here.emplace(static_cast<int>(owner), e.what());
    }
  };
  const auto moved = c.all_gather("local:read", [&] {
    for (const auto& item : plan->items) {
      if (item.type == ReadItemType::Value) {
        const auto& storage = std::get<BytesStorageMetadata>(index.metadata.state_dict_metadata.at(item.storage_fqn));
        planner.load_value(item, decode_value(storage.encoding, index.values.at(item.storage_fqn), item.storage_fqn));
        continue;
      }
      const auto dest = planner.resolve_tensor(item);
      const auto block = dest_block(dest, item);
      const auto& storage = tensor_storage(index, item.storage_fqn);
      std::vector<std::size_t> overlapped = item.source_chunks;
      if (overlapped.empty()) overlapped.push_back(0);
      for (const auto k : overlapped) {
        const auto box = chunk_box(storage, static_cast<std::int64_t>(k));
        const auto part = intersect(box, ChunkStorageMetadata{item.storage_offsets, item.lengths});
        if (!part) continue;  // the item's block and the chunk do not meet
        const auto owner = static_cast<std::size_t>(owners.at(item.storage_fqn).at(k));
        if (sources.here.at(owner)) {
          if (damaged_here.count(static_cast<int>(owner)) == 0) read_in_place(item, *part, dest, storage, k, owner);
          continue;
        }
        const auto& from = chunks.at(ChunkKey{item.storage_fqn, static_cast<std::int64_t>(k)});
        narrowed(block, minus(part->offsets, item.storage_offsets), part->sizes)
            .copy_(narrowed(from, minus(part->offsets, box.offsets), part->sizes));
      }
      planner.commit_tensor(item, dest);
    }
    for (auto& [owner, reader] : in_place) {
      try {
        reader.close();
      } catch (const std::exception& e) {
        damaged_here.emplace(static_cast<int>(owner), e.what());
      }
    }
    return encode_message(std::pair(std::pair(counts.bytes_read, counts.bytes_received), damaged_here));
  });
  for (const auto& m : moved) {
    auto [moved_bytes, damaged] =
        ByteReader::decode<std::pair<std::pair<std::int64_t, std::int64_t>, std::map<int, std::string>>>(m);
    result.counts.bytes_read += moved_bytes.first;
    result.counts.bytes_received += moved_bytes.second;
    for (auto& [owner, problem] : damaged) result.damaged.emplace(owner, std::move(problem));
  }
  if (!result.damaged.empty()) {
    result.state_written = true;
    return result;  // the caller chooses again; Stateful objects are not committed
  }
  if (expand)
    c.all_gather("load:commit", [&] {
      commit_load(expansion, state);
      return Bytes();
    });
  return result;
}

}  // namespace detail
}  // namespace h5dcp
