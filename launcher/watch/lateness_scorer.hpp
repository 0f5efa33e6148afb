// Straggler detection's rule (docs/stragglers.md): from each rank's entry times into collectives
// (rdzv/stragglers.hpp's EntryTime, every node's, on node 0's clock), which ranks and nodes make
// the others wait. Written out, at each scoring (every --straggler_window / 3):
//   1. Keep the entries of the last --straggler_window (by entry time), one per (rank, group, #N).
//   2. A collective (group, #N) counts when every rank seen in that group in the window entered
//      it (at least two): each rank's lateness in it is its entry time minus the median of the
//      ranks' entry times.
//   3. The steps: in each group, its most frequent signature (op and sizes) is the anchor, and
//      one step lies between two of its occurrences; the step time is the median time between
//      them. A rank's sample is its summed lateness over a whole step: a rank late by X before
//      a step's first collective is late by X in it, and by nothing in the collectives after it
//      in the same step (they wait for nobody). Without an anchor seen three times, each
//      collective's lateness is a sample and the step is unknown.
//   4. A rank's lateness is the median of its samples (at least `min_samples`), in the group
//      where it has the most: one slow step, a checkpoint or a garbage collection moves a median
//      of many steps little, where it would move a mean or a maximum.
//   5. A rank is late in this scoring when its lateness is at least `min_ms` and at least
//      `min_fraction` of a step (when the step is known).
//   6. It is flagged a straggler after `persist` scorings late in a row, and recovers after
//      `persist` scorings in a row that are not (with enough collectives: a window without
//      collectives, an evaluation or a checkpoint, changes nothing).
//   7. A node is flagged when more than half of its ranks are (its ranks late together); its
//      lateness is the median of its ranks'. Nodes are flagged only in a job of several nodes.
// Pure apart from its memory of the window and of the flags. Not thread-safe.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "launcher/rdzv/stragglers.hpp"

namespace ddp::launcher {

struct LatenessOptions {
  StragglerMode mode = StragglerMode::Warn;
  std::chrono::milliseconds window{std::chrono::seconds(30)};  // --straggler_window
  double min_ms = 20;                                          // --straggler_min_ms: the absolute threshold
  double min_fraction = 0.1;                                   // --straggler_fraction: the relative one (of a step)
  int persist = 2;                                             // scorings in a row (step 6)
  int min_samples = 3;                                         // samples (steps) a rank needs in the window (step 4)
  std::chrono::seconds history{600};                           // how far RankLateness::history reaches
};

// A collective every rank of its group entered (step 2): when (the ranks' median, unix s), its
// signature, and each rank's lateness in it (ms).
struct Counted {
  double mid_s = 0;
  std::string signature;
  std::map<int, double> late;
};
// One group's samples by rank (step 3), and its step time (ms) when known.
struct GroupSamples {
  std::map<int, std::vector<double>> late;
  std::optional<double> step_ms;
};

// Where a rank runs.
struct RankPlace {
  int node = 0;
  std::string host;
};

class LatenessScorer {
 public:
  explicit LatenessScorer(LatenessOptions options) : o_(options) {}

  // New entries (any order, repeats ignored). Entries older than the window are dropped at the
  // next score().
  void add(const std::vector<EntryTime>& entries);
  // Steps 1-7 at `now` (unix s) for the ranks of `places` (by rank). Appends to `changes` the
  // stragglers found and recovered since the last call. Never throws (but std::bad_alloc).
  StragglerScores score(double now, const std::map<int, RankPlace>& places, std::vector<StragglerChange>& changes);
  // A new round: the window and the flags start afresh.
  void reset();

 private:
  struct Flag {
    int late_streak = 0, ok_streak = 0;
    bool flagged = false;
    double since = 0;  // the first late scoring of the present streak (0: none)
  };
  void step_flag(Flag& f, bool scored, bool late, double now, bool& found, bool& recovered, double& for_s) const;

  LatenessOptions o_;
  std::map<std::tuple<std::string, long long, int>, EntryTime> window_;  // (group, #N, rank)
  std::map<int, Flag> rank_flags_;
  std::map<int, Flag> node_flags_;
  std::map<int, std::vector<std::pair<double, double>>> history_;
};

// The median of `values` (not empty). Pure.
double median_of(std::vector<double> values);

}  // namespace ddp::launcher
