#pragma once
// Reusing a save's global plan when the sharding did not change (DCP's plan
// caching), pure: what a rank offers in the plan step, what the coordinator
// replies, and the checks of the values on reuse. The protocol is in
// api/save_steps.cpp.
//
// A rank that holds a cached plan whose layout digest equals its new local
// plan's offers the cache's generation and its values only; the others offer
// their whole local plan. When every rank offers the coordinator's
// generation, the cached plan is reused and only the values travel; when
// every rank offers a whole plan, it is planned as without a cache; a mix is
// planned in a second round with every rank's whole plan.

#include <cstdint>
#include <string>
#include <vector>

#include "base/byte_codec.hpp"
#include "h5dcp/plan.hpp"

namespace h5dcp::detail {

/// What a local plan says about the file's layout: keys, kinds, dtypes,
/// global shapes, blocks and shard indices, containers, the values' encodings
/// and sizes (not their payloads, which change from save to save and travel
/// anyway), and the group's size and coordinator. XXH3-64.
std::uint64_t layout_digest(const SavePlan& plan, int world_size, int coordinator);

/// The plan's values alone: what a rank sends when the plan is reused.
SavePlan values_of(const SavePlan& plan);

/// The payloads of `cached`'s values (in its order) from every rank's
/// current values (index = rank; values_of each rank's local plan), checked
/// as create_global_save_plan checks them: the ranks that hold a value agree
/// on it (UsageError naming the fqn and two ranks); each value is held by
/// some rank, and each offered value is in the plan (Error otherwise: the
/// digests said the layout is the same).
std::vector<std::string> current_values(const GlobalSavePlan& cached, const std::vector<SavePlan>& values);

/// A rank's offer in the plan step.
struct PlanOffer {
  std::uint64_t generation = 0;  ///< the cached plan it can reuse; 0: none, `plan` is its whole local plan
  SavePlan plan;                 ///< its whole local plan, or (generation != 0) its values only
};

/// The coordinator's reply.
struct PlanReply {
  enum class Kind : std::uint8_t { Planned, Reused, SendWholePlans };
  Kind kind = Kind::Planned;
  std::uint64_t generation = 0;     ///< Planned: the new plan's generation
  Bytes plan;                       ///< Planned: the encoded global plan
  std::string temp_path;            ///< Reused: this save's
  std::string created;              ///< Reused: this save's
  std::vector<std::string> values;  ///< Reused: current_values
};

/// The generation a rank offers: its cached plan's when that plan's layout
/// digest is the new local plan's `digest`, else 0 (plan anew).
std::uint64_t offered_generation(std::uint64_t cached_generation, std::uint64_t cached_digest, std::uint64_t digest);

/// The coordinator's decision (its cache's generation, every rank's offer):
/// Reused when all offer the cached generation, Planned when none offers
/// one, SendWholePlans on a mix (the cached plan no longer fits some rank).
PlanReply::Kind plan_decision(std::uint64_t cached_generation, const std::vector<PlanOffer>& offers);

Bytes encode(const PlanOffer& offer);
PlanOffer decode_plan_offer(std::string_view bytes);
Bytes encode(const PlanReply& reply);
PlanReply decode_plan_reply(std::string_view bytes);

}  // namespace h5dcp::detail
