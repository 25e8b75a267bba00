#pragma once
// Which node-local checkpoint a restarted job recovers from (issue 50),
// pure: the surviving nodes report what they hold, and every rank computes
// the same choice from the same reports. The step chosen is the newest one
// of this run, strictly newer than the newest shared checkpoint, whose
// every owner (a rank of the job that saved it) has at least one intact copy
// on a surviving node; copies of another run and copies that failed their
// checks are skipped and named. With no such step the caller loads the
// shared checkpoint as without a local tier.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace h5dcp::detail {

/// One copy file a node holds: the data of rank `owner_rank` of the job that
/// saved the step, intact when its checksums verified.
struct LocalCopyReport {
  int owner_rank = 0;
  std::string file;     ///< where it is, to name it
  bool intact = false;  ///< every checksum verified
  std::string problem;  ///< why not intact (truncated, checksum mismatch in ...)
};

/// One step a node holds, as its files record it.
struct LocalStepReport {
  std::int64_t step = 0;
  std::string run_id;                   ///< the run identity in its files
  std::vector<std::string> rank_nodes;  ///< the node of every rank of the saving job (the owners)
  std::vector<LocalCopyReport> copies;
};

/// What a surviving node holds.
struct SurvivingNodeReport {
  std::string node;
  std::vector<LocalStepReport> steps;
};

/// A copy not used, and why (corrupt, of another run, inconsistent).
struct SkippedCopy {
  std::string node;
  std::int64_t step = 0;
  int owner_rank = 0;
  std::string file;
  std::string reason;
};

/// Where one owner's data is read from.
struct CopySource {
  std::string node;
  std::string file;
};

/// The choice. `step` empty: no local step qualifies, load the shared
/// checkpoint; `rejected` says why for each newer local step.
struct LocalStepChoice {
  std::optional<std::int64_t> step;
  std::vector<std::string> rank_nodes;  ///< the chosen step's saving job: the node of each owner rank
  std::vector<CopySource> sources;      ///< each owner rank's copy (index = owner rank)
  std::vector<SkippedCopy> skipped;     ///< the unusable copies of the steps considered, and of other runs
  std::vector<std::string> rejected;    ///< one line per local step passed over, newest first
};

/// The local step to recover from: of the steps of run `run_id` the
/// surviving nodes hold, the newest that is newer than `shared_step` (the
/// newest shared checkpoint, if any) and whose every owner rank has an
/// intact copy on some surviving node. Each owner is served by its own node
/// when that survived with an intact copy, else by the surviving node with
/// an intact copy that serves the fewest owners so far (by node name on a
/// tie). Steps whose nodes disagree on the saving job are rejected. The
/// result does not depend on the order of `nodes` or of their reports.
LocalStepChoice choose_local_step(const std::string& run_id, std::optional<std::int64_t> shared_step,
                                  const std::vector<SurvivingNodeReport>& nodes);

/// After loading from `choice` found the copies of some owners unreadable
/// (`damaged`: owner rank -> what reading its copy found, a checksum that
/// differs, a truncated file): marks those copies in `reports` as not intact,
/// with why, so that choosing again passes them over for a replica or an
/// older step. Throws UsageError when a damaged owner's copy is in no report
/// or already marked (the reports are not those `choice` was made from): a
/// caller choosing again must always have fewer copies to choose from.
void mark_damaged(std::vector<SurvivingNodeReport>& reports, const LocalStepChoice& choice,
                  const std::map<int, std::string>& damaged);

}  // namespace h5dcp::detail
