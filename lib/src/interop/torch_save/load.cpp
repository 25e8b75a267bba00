// load_torch_save(): a torch.save file onto N ranks, read once, by the
// coordinator, which sends each rank only the blocks it holds.
//
//   load:metadata  broadcast       the coordinator opens the file and shares data.pkl's index
//   load:plan      all_reduce      each rank plans its reads against the index (like load())
//                                  and resolves its destination blocks; the coordinator cuts
//                                  every block into pieces of at most max_message_bytes and
//                                  schedules them in rounds, grouped by storage
//   load:read      reduce_scatter  once per round: the coordinator reads the storages the
//                                  round needs (each storage once in the whole load) and
//                                  sends every rank its own pieces
//   load:commit    all_gather      tensors committed, non-tensor values stored
//
// A rank that fails to place a piece reports it in the next step, so every
// rank stops at the same step with the same CheckpointError.

#include "interop/torch_save/load.hpp"
#include "torch/tensor_blocks.hpp"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "api/checkpoint_session.hpp"
#include "base/exception_text.hpp"
#include "comm/comm.hpp"
#include "h5dcp/error.hpp"
#include "h5dcp/planner.hpp"
#include "interop/torch_save/archive.hpp"
#include "plan/chunk_geometry.hpp"
#include "torch/dtype_mapping.hpp"
#include "torch/value_codec.hpp"

namespace h5dcp::detail {
namespace {

constexpr std::int64_t kMinMessageBytes = 4096;
constexpr std::int64_t kMaxMessageBytes = std::int64_t{1} << 30;

// One block a rank asked for: read item `item` of its plan.
struct Request {
  std::uint64_t item = 0;
  std::string fqn;
  Shape offsets;  // in the stored tensor
  Shape lengths;
};

}  // namespace
}  // namespace h5dcp::detail

namespace h5dcp {
H5DCP_MESSAGE_FIELDS(detail::Request, m.item, m.fqn, m.offsets, m.lengths);
}

namespace h5dcp::detail {
namespace {

// A piece of a request, sent in one round.
struct Piece {
  int rank = 0;
  std::uint64_t item = 0;
  std::string fqn;
  Shape offsets;          // in the stored tensor
  Shape request_offsets;  // in the requested block
  Shape sizes;
  std::int64_t bytes = 0;
};

// The coordinator's side: the file, the schedule, and the one storage it holds.
class Sender {
 public:
  Sender(std::unique_ptr<TorchSaveReader> reader, const TorchSaveIndex& index)
      : reader_(std::move(reader)), index_(index) {}

  // Cuts every rank's requests into pieces and groups them into rounds.
  std::int64_t schedule(const std::vector<Bytes>& all_requests, std::int64_t max_bytes) {
    std::vector<Piece> pieces;
    for (std::size_t rank = 0; rank < all_requests.size(); ++rank) {
      for (auto& q : ByteReader::decode<std::vector<Request>>(all_requests[rank])) {
        const auto element = static_cast<std::int64_t>(dtype_size(index_.tensors.at(q.fqn).dtype));
        for (auto& box : split_block(q.lengths, element, max_bytes)) {
          Piece p{static_cast<int>(rank),     q.item, q.fqn, q.offsets, box.offsets, box.sizes,
                  volume(box.sizes) * element};
          for (std::size_t d = 0; d < p.offsets.size(); ++d) p.offsets[d] += box.offsets[d];
          pieces.push_back(std::move(p));
        }
      }
    }
    // By storage, so each storage is read once; stable keeps ranks and pieces in order.
    std::stable_sort(pieces.begin(), pieces.end(), [&](const Piece& a, const Piece& b) {
      const auto& sa = index_.tensors.at(a.fqn).storage;
      const auto& sb = index_.tensors.at(b.fqn).storage;
      return sa != sb ? sa < sb : a.fqn < b.fqn;
    });
    rounds_.clear();
    std::int64_t bytes = 0;
    for (auto& p : pieces) {
      if (rounds_.empty() || bytes + p.bytes > max_bytes) {
        rounds_.emplace_back();
        bytes = 0;
      }
      bytes += p.bytes;
      rounds_.back().push_back(std::move(p));
    }
    return static_cast<std::int64_t>(rounds_.size());
  }

  // The payload of every rank for round `round`.
  std::vector<Bytes> build(std::size_t round, int ranks) {
    std::vector<ByteWriter> out(static_cast<std::size_t>(ranks));
    for (const auto& p : rounds_.at(round)) {
      const auto& info = index_.tensors.at(p.fqn);
      if (storage_key_ != info.storage || !storage_.defined()) {
        storage_ = at::Tensor();  // drop the previous storage before reading the next
        storage_ = reader_->read_storage(info.storage, index_.storages.at(info.storage));
        storage_key_ = info.storage;
      }
      const auto block = narrowed(view_of(storage_, info), p.offsets, p.sizes).contiguous();
      auto& w = out[static_cast<std::size_t>(p.rank)];
      w.put(p.item);
      w.put_ints(p.request_offsets);
      w.put_ints(p.sizes);
      w.put_string(std::string_view(static_cast<const char*>(block.data_ptr()), static_cast<std::size_t>(p.bytes)));
    }
    std::vector<Bytes> payloads;
    payloads.reserve(out.size());
    for (auto& w : out) payloads.push_back(w.take());
    return payloads;
  }

 private:
  std::unique_ptr<TorchSaveReader> reader_;
  const TorchSaveIndex& index_;
  std::vector<std::vector<Piece>> rounds_;
  std::string storage_key_;
  at::Tensor storage_;
};

// Places the pieces of one round's payload into the destination blocks.
std::int64_t receive(const Bytes& payload, const LoadPlan& plan, const std::vector<at::Tensor>& blocks) {
  ByteReader r(payload);
  std::int64_t received = 0;
  while (!r.done()) {
    const auto item = r.get<std::uint64_t>();
    const auto offsets = r.get_ints();
    const auto sizes = r.get_ints();
    const auto data = r.get_string();
    if (item >= plan.items.size() || !blocks[item].defined()) throw Error("h5dcp: a piece for an unknown read arrived");
    const auto stored = to_scalar_type(plan.items[item].dtype);
    const auto bytes = static_cast<std::size_t>(volume(sizes)) * dtype_size(plan.items[item].dtype);
    if (data.size() != bytes)
      throw Error("h5dcp: a piece of '" + plan.items[item].storage_fqn + "' has the wrong size");
    auto target = narrowed(blocks[item], offsets, sizes);
    if (target.device().is_cpu() && target.is_contiguous() && target.scalar_type() == stored) {
      std::memcpy(target.data_ptr(), data.data(), bytes);
    } else {
      auto staging = at::empty(sizes, at::TensorOptions().dtype(stored));
      std::memcpy(staging.data_ptr(), data.data(), bytes);
      target.copy_(staging);
    }
    received += static_cast<std::int64_t>(bytes);
  }
  return received;
}

}  // namespace

LoadResult load_torch_save_with_stats(StateDict& state_dict, const std::string& path,
                                      const TorchSaveLoadOptions& options, MPI_Comm comm, TorchLoadStats& stats) {
  Comm c(comm, options.coordinator);
  c.require_same("torch.save paths", path);
  c.set_timeout(resolve_timeout(options.timeout_seconds));
  // Rounds go through MPI_Scatterv, whose counts are ints: at most 1 GiB.
  const auto max_bytes = std::clamp(options.max_message_bytes, kMinMessageBytes, kMaxMessageBytes);

  std::unique_ptr<TorchSaveReader> reader;  // the coordinator's, open for the whole load
  const auto index = decode_torch_save_index(c.broadcast("load:metadata", [&] {
    reader = std::make_unique<TorchSaveReader>(path);
    return encode(reader->read_index());
  }));
  const auto metadata = metadata_of(index);
  std::optional<Sender> sender;
  if (reader) sender.emplace(std::move(reader), index);

  DefaultLoadPlanner default_planner(options.strict, options.convert_dtype);
  LoadPlanner& planner = options.planner != nullptr ? *options.planner : default_planner;
  std::optional<LoadPlan> plan;
  std::vector<at::Tensor> dests;   // per read item: the tensor resolve_tensor gave
  std::vector<at::Tensor> blocks;  // per read item: the block of it the item fills
  const auto rounds = c.all_reduce(
      "load:plan",
      [&] {
        planner.set_up(state_dict, metadata, c.is_coordinator());
        plan = planner.create_local_plan();
        dests.assign(plan->items.size(), at::Tensor());
        blocks.assign(plan->items.size(), at::Tensor());
        std::vector<Request> requests;
        for (std::size_t i = 0; i < plan->items.size(); ++i) {
          const auto& item = plan->items[i];
          if (item.type != ReadItemType::Tensor) continue;
          dests[i] = planner.resolve_tensor(item);
          blocks[i] = dest_block(dests[i], item);
          requests.push_back(Request{i, item.storage_fqn, item.storage_offsets, item.lengths});
        }
        return encode_message(requests);
      },
      [&](const std::vector<Bytes>& all) {
        ByteWriter w;
        w.put<std::int64_t>(sender->schedule(all, max_bytes));
        return w.take();
      });
  stats.rounds = ByteReader(rounds).get<std::int64_t>();

  std::string pending;  // a failure placing pieces, reported by the next step
  for (std::int64_t round = 0; round < stats.rounds; ++round) {
    const auto payload = c.reduce_scatter(
        "load:read",
        [&] {
          if (!pending.empty()) throw Error(pending);
          return Bytes();
        },
        [&](const std::vector<Bytes>&) { return sender->build(static_cast<std::size_t>(round), c.size()); });
    try {
      stats.bytes_received += receive(payload, *plan, blocks);
    } catch (const std::exception& e) {
      if (pending.empty()) pending = detail::exception_text(e);
    }
  }
  c.all_gather("load:commit", [&] {
    if (!pending.empty()) throw Error(pending);
    for (std::size_t i = 0; i < plan->items.size(); ++i) {
      const auto& item = plan->items[i];
      if (item.type == ReadItemType::Tensor) {
        planner.commit_tensor(item, dests[i]);
      } else {
        const auto& v = index.values.at(item.storage_fqn);
        planner.load_value(item, decode_value(v.encoding, v.payload, item.storage_fqn));
      }
    }
    return Bytes();
  });
  return LoadResult{plan->missing, plan->unexpected};
}

}  // namespace h5dcp::detail

namespace h5dcp {

LoadResult load_torch_save(StateDict& state_dict, const std::string& path, const TorchSaveLoadOptions& options,
                           MPI_Comm comm) {
  detail::TorchLoadStats stats;
  return detail::load_torch_save_with_stats(state_dict, path, options, comm, stats);
}

}  // namespace h5dcp
