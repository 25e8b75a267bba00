#include "plan_bench_save.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "plan/block_writes.hpp"
#include "plan/codec.hpp"
#include "plan/plan_reuse.hpp"
#include "plan/save_plan.hpp"

namespace h5dcp_bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::int64_t kCols = 64;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::int64_t rows_per_rank(std::int64_t tensor) { return 1 + tensor % 4; }

// What create_local_plan returns on `rank`: one shard of every tensor.
h5dcp::SavePlan local_plan(std::int64_t rank, std::int64_t ranks, std::int64_t tensors) {
  h5dcp::SavePlan plan;
  plan.items.reserve(static_cast<std::size_t>(tensors));
  for (std::int64_t t = 0; t < tensors; ++t) {
    const auto rows = rows_per_rank(t);
    h5dcp::WriteItem item;
    item.index.fqn = "model.layers." + std::to_string(t / 12) + ".param" + std::to_string(t % 12);
    item.index.offset = std::vector<std::int64_t>{rank * rows, 0};
    item.index.index = 0;
    item.type = h5dcp::WriteItemType::Shard;
    item.dtype = h5dcp::DType::Float32;
    item.global_shape = {ranks * rows, kCols};
    item.chunk = {{rank * rows, 0}, {rows, kCols}};
    plan.items.push_back(std::move(item));
  }
  return plan;
}

}  // namespace

bool run_save_planning(std::int64_t ranks, std::int64_t tensors) {
  // Every rank's local plan (made, untimed: a state dict walk on each rank).
  std::vector<h5dcp::SavePlan> locals;
  locals.reserve(static_cast<std::size_t>(ranks));
  for (std::int64_t r = 0; r < ranks; ++r) locals.push_back(local_plan(r, ranks, tensors));

  // One rank's part before the exchange: check and encode its plan.
  auto t0 = Clock::now();
  h5dcp::detail::validate_local_plan(locals[0]);
  const auto rank0_bytes = h5dcp::detail::encode(locals[0]);
  const double local_s = since(t0);
  std::vector<h5dcp::detail::Bytes> sent;
  sent.reserve(locals.size());
  for (const auto& plan : locals) sent.push_back(h5dcp::detail::encode(plan));
  locals.clear();
  locals.shrink_to_fit();

  // The coordinator: decode every plan, merge, encode the global plan.
  t0 = Clock::now();
  std::vector<h5dcp::SavePlan> decoded;
  decoded.reserve(sent.size());
  for (const auto& b : sent) decoded.push_back(h5dcp::detail::decode_save_plan(b));
  const double decode_s = since(t0);
  t0 = Clock::now();
  auto global = h5dcp::detail::create_global_save_plan(decoded);
  global.world_size = static_cast<int>(ranks);
  const double merge_s = since(t0);
  t0 = Clock::now();
  const auto global_bytes = h5dcp::detail::encode(global);
  const double encode_s = since(t0);
  const double coordinator_s = decode_s + merge_s + encode_s;
  std::int64_t gathered = 0;
  for (const auto& b : sent) gathered += static_cast<std::int64_t>(b.size());

  // One rank after the exchange: decode the global plan, find its blocks.
  t0 = Clock::now();
  const auto received = h5dcp::detail::decode_global_save_plan(global_bytes);
  const auto mine = h5dcp::detail::blocks_written_by(received, static_cast<int>(ranks - 1));
  const double rank_s = since(t0);

  bool ok =
      received.tensors.size() == static_cast<std::size_t>(tensors) && mine.size() == static_cast<std::size_t>(tensors);
  for (const auto& t : received.tensors) ok = ok && t.chunks.size() == static_cast<std::size_t>(ranks);
  if (!ok) {
    std::fprintf(stderr, "h5dcp-plan-bench: save planning: %zu tensors planned, %zu blocks for the last rank\n",
                 received.tensors.size(), mine.size());
    return false;
  }
  std::printf("\nsave planning, %lld ranks x %lld row-sharded tensors (seconds, one core):\n",
              static_cast<long long>(ranks), static_cast<long long>(tensors));
  std::printf("  %-58s %9.3f\n", "one rank: check and encode its local plan", local_s);
  std::printf("  %-58s %9.3f\n", "coordinator: decode every rank's local plan", decode_s);
  std::printf("  %-58s %9.3f\n", "coordinator: merge them (checks, dedup, tiling, balance)", merge_s);
  std::printf("  %-58s %9.3f\n", "coordinator: encode the global plan", encode_s);
  std::printf("  %-58s %9.3f\n", "one rank: decode the global plan, find its blocks", rank_s);
  std::printf("  %-58s %9.3f\n", "the critical path (the five above)", local_s + coordinator_s + rank_s);
  std::printf(
      "  bytes per rank: sends %lld (its local plan), receives %lld (the global plan); the coordinator\n"
      "  receives %lld in all\n",
      static_cast<long long>(rank0_bytes.size()), static_cast<long long>(global_bytes.size()),
      static_cast<long long>(gathered));

  // The next save, same sharding, plan reused (SavePlanCache): each rank
  // digests its new local plan and offers a token with its values; the
  // coordinator checks the tokens and the values; each rank copies its
  // cached plan with the reply's values.
  const std::uint64_t generation = 12345;
  std::vector<h5dcp::detail::Bytes> offers;
  offers.reserve(static_cast<std::size_t>(ranks));
  t0 = Clock::now();
  const auto rank0_local = local_plan(0, ranks, tensors);
  const double walk_s = since(t0);
  t0 = Clock::now();
  (void)h5dcp::detail::layout_digest(rank0_local, static_cast<int>(ranks), 0);
  const auto offer0 =
      h5dcp::detail::encode(h5dcp::detail::PlanOffer{generation, h5dcp::detail::values_of(rank0_local)});
  const double offer_s = since(t0);
  for (std::int64_t r = 0; r < ranks; ++r) offers.push_back(offer0);
  t0 = Clock::now();
  std::vector<h5dcp::SavePlan> values;
  values.reserve(offers.size());
  bool tokens_match = true;
  for (const auto& o : offers) {
    auto offer = h5dcp::detail::decode_plan_offer(o);
    tokens_match = tokens_match && offer.generation == generation;
    values.push_back(std::move(offer.plan));
  }
  h5dcp::detail::PlanReply reply;
  reply.kind = h5dcp::detail::PlanReply::Kind::Reused;
  reply.values = h5dcp::detail::current_values(received, values);
  const auto reply_bytes = h5dcp::detail::encode(reply);
  const double check_s = since(t0);
  t0 = Clock::now();
  auto reused = h5dcp::detail::decode_plan_reply(reply_bytes);
  auto copy = received;
  for (std::size_t v = 0; v < copy.values.size(); ++v) copy.values[v].payload = std::move(reused.values[v]);
  const double apply_s = since(t0);
  if (!tokens_match || copy.tensors.size() != received.tensors.size()) {
    std::fprintf(stderr, "h5dcp-plan-bench: the reused plan differs\n");
    return false;
  }
  std::printf("\nthe next save with the same sharding, plan reused (SavePlanCache), seconds:\n");
  std::printf("  %-58s %9.3f\n", "(not planning: one rank's state dict walk, as above)", walk_s);
  std::printf("  %-58s %9.3f\n", "one rank: digest its plan, offer a token and its values", offer_s);
  std::printf("  %-58s %9.3f\n", "coordinator: check every token and the values, reply", check_s);
  std::printf("  %-58s %9.3f\n", "one rank: copy its cached plan with the reply's values", apply_s);
  std::printf("  %-58s %9.3f\n", "the reused plan's critical path (the three above)", offer_s + check_s + apply_s);
  std::printf("  bytes per rank: sends %lld (token and values), receives %lld (the reply)\n",
              static_cast<long long>(offer0.size()), static_cast<long long>(reply_bytes.size()));
  return true;
}

}  // namespace h5dcp_bench
