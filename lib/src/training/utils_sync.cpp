// sync_params_and_buffers: rank src's tensors to every rank, in size-bounded
// buckets of one dtype, each one MPI_Bcast of flattened bytes.

#include <ATen/ops/empty.h>

#include <algorithm>
#include <climits>
#include <string>

#include "base/exception_text.hpp"
#include "comm/plain_calls.hpp"
#include "h5dcp/error.hpp"
#include "plan/broadcast_buckets.hpp"
#include "training/module_sync_internal.hpp"

namespace h5dcp {
namespace {

std::size_t bytes_of(const at::Tensor& t) { return static_cast<std::size_t>(t.numel()) * t.element_size(); }

// A lone contiguous host tensor is broadcast from (into) its own memory.
bool in_place(const BroadcastBucket& bucket, const std::vector<at::Tensor>& tensors) {
  if (bucket.tensors.size() != 1) return false;
  const auto& t = tensors[bucket.tensors.front()];
  return t.device().is_cpu() && t.is_contiguous();
}

// The part of the staging buffer that holds tensor `t` at byte `offset`.
at::Tensor slot(const at::Tensor& buffer, std::size_t offset, const at::Tensor& t) {
  return buffer.narrow(0, static_cast<std::int64_t>(offset), static_cast<std::int64_t>(bytes_of(t)))
      .view(t.scalar_type())
      .view(t.sizes());
}

}  // namespace

std::vector<BroadcastBucket> plan_broadcast_buckets(const std::vector<at::Tensor>& tensors, std::size_t bucket_bytes) {
  std::vector<detail::BucketItem> items;
  items.reserve(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (!tensors[i].defined())
      throw UsageError("h5dcp: tensor " + std::to_string(i) + " of the broadcast is undefined");
    items.push_back({static_cast<std::int32_t>(tensors[i].scalar_type()), bytes_of(tensors[i])});
  }
  std::vector<BroadcastBucket> buckets;
  for (auto& members : detail::assign_buckets(items, bucket_bytes)) {
    BroadcastBucket bucket;
    bucket.dtype = tensors[members.front()].scalar_type();
    for (auto i : members) bucket.bytes += items[i].bytes;
    bucket.tensors = std::move(members);
    buckets.push_back(std::move(bucket));
  }
  return buckets;
}

namespace detail {

std::vector<BroadcastBucket> broadcast_named(const NamedTensors& named, std::size_t bucket_bytes, int src,
                                             MPI_Comm raw) {
  const Comm comm(raw, src);  // every rank throws the same UsageError for a bad or disagreeing src
  comm.require_same("bucket sizes (bucket_bytes)", std::to_string(bucket_bytes));
  require_same_tensors(comm, named, "module states", "sync_module_states:check", /*dense_only=*/true);

  std::vector<at::Tensor> tensors;
  tensors.reserve(named.size());
  for (const auto& [name, tensor] : named) tensors.push_back(tensor.detach());  // no autograd for the copies
  auto buckets = plan_broadcast_buckets(tensors, bucket_bytes);
  if (!comm.distributed() || comm.size() == 1) return buckets;

  // One staging buffer for every bucket that is not broadcast in place,
  // allocated before the first broadcast: a rank that cannot have it must
  // not leave the others waiting in MPI_Bcast.
  std::size_t staging = 0;
  for (const auto& b : buckets)
    if (!in_place(b, tensors)) staging = std::max(staging, b.bytes);
  at::Tensor buffer;
  comm.all_gather("sync_module_states:stage", [&] {
    if (staging != 0) buffer = at::empty({static_cast<std::int64_t>(staging)}, at::kByte);
    return Bytes();
  });

  // Every rank makes every MPI_Bcast whatever fails locally; the failures
  // are exchanged at the end.
  std::string failure;
  const auto attempt = [&](const auto& work) {
    if (!failure.empty()) return;
    try {
      work();
    } catch (const std::exception& e) {
      failure = detail::exception_text(e);
    }
  };
  const bool root = comm.is_coordinator();
  for (const auto& b : buckets) {
    if (b.bytes == 0) continue;
    if (in_place(b, tensors)) {
      auto& t = tensors[b.tensors.front()];
      try {
        detail::broadcast_raw_bytes(t.data_ptr(), b.bytes, src, comm.raw());
      } catch (const std::exception& e) {
        if (failure.empty()) failure = detail::exception_text(e);
      }
      continue;
    }
    if (root)
      attempt([&] {
        std::size_t offset = 0;
        for (auto i : b.tensors) {
          if (bytes_of(tensors[i]) != 0) slot(buffer, offset, tensors[i]).copy_(tensors[i]);
          offset += bytes_of(tensors[i]);
        }
      });
    try {
      detail::broadcast_raw_bytes(buffer.data_ptr(), b.bytes, src, comm.raw());
    } catch (const std::exception& e) {
      if (failure.empty()) failure = detail::exception_text(e);
    }
    if (!root)
      attempt([&] {
        std::size_t offset = 0;
        for (auto i : b.tensors) {
          if (bytes_of(tensors[i]) != 0) tensors[i].copy_(slot(buffer, offset, tensors[i]));
          offset += bytes_of(tensors[i]);
        }
      });
  }
  comm.all_gather("sync_module_states:broadcast", [&] {
    if (!failure.empty()) throw Error(failure);
    return Bytes();
  });
  return buckets;
}

}  // namespace detail

std::vector<BroadcastBucket> sync_params_and_buffers(const std::vector<at::Tensor>& tensors, std::size_t bucket_bytes,
                                                     int src, MPI_Comm comm) {
  NamedTensors named;
  named.reserve(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) named.emplace_back("tensor " + std::to_string(i), tensors[i]);
  return detail::broadcast_named(named, bucket_bytes, src, comm);
}

}  // namespace h5dcp
