#include "plan/plan_reuse.hpp"

#include <algorithm>

#include "base/checksum.hpp"
#include "h5dcp/error.hpp"
#include "plan/codec.hpp"

namespace h5dcp {
namespace detail {
template <>
struct LastEnumerator<PlanReply::Kind> {
  static constexpr PlanReply::Kind value = PlanReply::Kind::SendWholePlans;
};
}  // namespace detail
H5DCP_MESSAGE_FIELDS(detail::PlanReply, m.kind, m.generation, m.plan, m.temp_path, m.created, m.values);
}  // namespace h5dcp

namespace h5dcp::detail {

std::uint64_t layout_digest(const SavePlan& plan, int world_size, int coordinator) {
  SavePlan layout;
  layout.containers = plan.containers;
  layout.items.reserve(plan.items.size());
  for (const auto& item : plan.items) {
    WriteItem shape_only;
    shape_only.index = item.index;
    shape_only.type = item.type;
    shape_only.dtype = item.dtype;
    shape_only.global_shape = item.global_shape;
    shape_only.chunk = item.chunk;
    shape_only.encoding = item.encoding;
    // The size decides the value's dataset; the bytes travel on every save.
    shape_only.payload = std::to_string(item.payload.size());
    layout.items.push_back(std::move(shape_only));
  }
  ByteWriter w;
  w.put<std::int32_t>(world_size);
  w.put<std::int32_t>(coordinator);
  w.put_string(encode(layout));
  const auto bytes = w.take();
  return checksum(bytes.data(), bytes.size());
}

SavePlan values_of(const SavePlan& plan) {
  SavePlan values;
  for (const auto& item : plan.items)
    if (item.type == WriteItemType::Value) values.items.push_back(item);
  return values;
}

std::vector<std::string> current_values(const GlobalSavePlan& cached, const std::vector<SavePlan>& values) {
  std::vector<std::string> payloads(cached.values.size());
  std::vector<int> first_rank(cached.values.size(), -1);
  for (std::size_t r = 0; r < values.size(); ++r) {
    const int rank = static_cast<int>(r);
    for (const auto& item : values[r].items) {
      const auto it = std::lower_bound(cached.values.begin(), cached.values.end(), item.index.fqn,
                                       [](const PlannedValue& v, const std::string& fqn) { return v.fqn < fqn; });
      if (it == cached.values.end() || it->fqn != item.index.fqn || item.type != WriteItemType::Value)
        throw Error("h5dcp: the reused save plan has no value '" + item.index.fqn + "' (rank " + std::to_string(rank) +
                    ")");
      const auto v = static_cast<std::size_t>(it - cached.values.begin());
      if (first_rank[v] < 0) {
        first_rank[v] = rank;
        payloads[v] = item.payload;
      } else if (payloads[v] != item.payload) {
        throw UsageError("h5dcp: ranks disagree on the value of '" + item.index.fqn + "' (ranks " +
                         std::to_string(first_rank[v]) + " and " + std::to_string(rank) +
                         "); a value saved from several ranks must be the same on all of them");
      }
    }
  }
  for (std::size_t v = 0; v < payloads.size(); ++v)
    if (first_rank[v] < 0) throw Error("h5dcp: no rank holds the value '" + cached.values[v].fqn + "' any more");
  return payloads;
}

std::uint64_t offered_generation(std::uint64_t cached_generation, std::uint64_t cached_digest, std::uint64_t digest) {
  return cached_generation != 0 && cached_digest == digest ? cached_generation : 0;
}

PlanReply::Kind plan_decision(std::uint64_t cached_generation, const std::vector<PlanOffer>& offers) {
  const auto offering = [&](std::uint64_t g) {
    return std::all_of(offers.begin(), offers.end(), [g](const PlanOffer& o) { return o.generation == g; });
  };
  if (cached_generation != 0 && offering(cached_generation)) return PlanReply::Kind::Reused;
  return offering(0) ? PlanReply::Kind::Planned : PlanReply::Kind::SendWholePlans;
}

Bytes encode(const PlanOffer& offer) {
  ByteWriter w;
  w.put<std::uint64_t>(offer.generation);
  w.put_string(encode(offer.plan));
  return w.take();
}

PlanOffer decode_plan_offer(std::string_view bytes) {
  ByteReader r(bytes);
  PlanOffer offer;
  offer.generation = r.get<std::uint64_t>();
  offer.plan = decode_save_plan(r.get_string());
  if (!r.done()) throw Error("h5dcp: corrupt message (trailing bytes)");
  return offer;
}

Bytes encode(const PlanReply& reply) { return encode_message(reply); }
PlanReply decode_plan_reply(std::string_view bytes) { return ByteReader::decode<PlanReply>(bytes); }

}  // namespace h5dcp::detail
