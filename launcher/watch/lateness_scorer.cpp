// See lateness_scorer.hpp.
#include "launcher/watch/lateness_scorer.hpp"

#include <algorithm>

namespace ddp::launcher {

double median_of(std::vector<double> v) {
  const std::size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double upper = v[mid];
  if (v.size() % 2 == 1) return upper;
  const double lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

namespace {

// Step 4 for one group: the anchor is its most frequent signature; between two of its
// occurrences lies one step. Each rank's samples are its summed lateness over each whole step
// (a rank late by X before a step's first collective is late by X in it and by nothing in the
// collectives after it, which wait for nobody); without an anchor seen three times, each
// collective's lateness is a sample and the step is unknown.
GroupSamples group_samples(const std::vector<Counted>& list) {
  GroupSamples g;
  std::map<std::string, std::vector<double>> by_sig;
  for (const Counted& c : list) by_sig[c.signature].push_back(c.mid_s);
  const std::pair<const std::string, std::vector<double>>* anchor = nullptr;
  for (const auto& kv : by_sig) {
    if (!anchor || kv.second.size() > anchor->second.size()) anchor = &kv;
  }
  if (!anchor || anchor->second.size() < 3) {
    for (const Counted& c : list)
      for (const auto& [rank, ms] : c.late) g.late[rank].push_back(ms);
    return g;
  }
  std::vector<double> gaps;
  for (std::size_t i = 1; i < anchor->second.size(); ++i) gaps.push_back(anchor->second[i] - anchor->second[i - 1]);
  if (const double s = median_of(gaps); s > 0) g.step_ms = s * 1000;
  std::map<int, double> sum;
  bool inside = false;  // from the first anchor on: whole steps only
  for (const Counted& c : list) {
    if (c.signature == anchor->first) {
      if (inside)
        for (const auto& [rank, ms] : sum) g.late[rank].push_back(ms);
      sum.clear();
      inside = true;
    }
    if (!inside) continue;
    for (const auto& [rank, ms] : c.late) sum[rank] += ms;
  }
  return g;
}

}  // namespace

void LatenessScorer::add(const std::vector<EntryTime>& entries) {
  for (const EntryTime& e : entries) window_.emplace(std::make_tuple(e.group, e.seq, e.rank), e);
}

void LatenessScorer::reset() {
  window_.clear();
  rank_flags_.clear();
  node_flags_.clear();
  history_.clear();
}

// Step 6 for one rank or node.
void LatenessScorer::step_flag(Flag& f, bool scored, bool late, double now, bool& found, bool& recovered,
                               double& for_s) const {
  found = recovered = false;
  if (!scored) return;  // nothing seen: neither late nor on time
  if (late) {
    f.ok_streak = 0;
    if (f.late_streak++ == 0 && !f.flagged) f.since = now;
    if (!f.flagged && f.late_streak >= o_.persist) {
      f.flagged = found = true;
      for_s = now - f.since;
    }
    return;
  }
  f.late_streak = 0;
  if (!f.flagged) {
    f.since = 0;
    return;
  }
  if (++f.ok_streak >= o_.persist) {
    f.flagged = false;
    recovered = true;
    for_s = now - f.since;
    f.since = 0;
  }
}

StragglerScores LatenessScorer::score(double now, const std::map<int, RankPlace>& places,
                                      std::vector<StragglerChange>& changes) {
  // Step 1.
  const std::int64_t newest =
      window_.empty() ? 0 : std::max_element(window_.begin(), window_.end(), [](auto& a, auto& b) {
                              return a.second.entered_ns < b.second.entered_ns;
                            })->second.entered_ns;
  const std::int64_t oldest = newest - std::chrono::duration_cast<std::chrono::nanoseconds>(o_.window).count();
  std::erase_if(window_, [&](const auto& kv) { return kv.second.entered_ns < oldest; });

  // Step 2: the window's collectives, and who took part in each group.
  std::map<std::pair<std::string, long long>, std::vector<const EntryTime*>> collectives;
  std::map<std::string, std::set<int>> members;
  for (const auto& [key, e] : window_) {
    collectives[{e.group, e.seq}].push_back(&e);
    members[e.group].insert(e.rank);
  }
  std::map<std::string, std::vector<Counted>> counted;  // by group, in collective order
  for (const auto& [id, entries] : collectives) {
    if (entries.size() < 2 || entries.size() != members[id.first].size()) continue;
    std::vector<double> times;
    for (const EntryTime* e : entries) times.push_back(static_cast<double>(e->entered_ns));
    const double mid = median_of(times);
    Counted c{mid / 1e9, entries.front()->signature, {}};
    for (const EntryTime* e : entries) c.late[e->rank] = (static_cast<double>(e->entered_ns) - mid) / 1e6;
    counted[id.first].push_back(std::move(c));
  }

  // Steps 3 and 4, per group; each rank is scored in the group where it has the most samples.
  std::map<int, std::vector<double>> late;  // by rank: its samples, ms
  std::map<int, std::optional<double>> step_of;
  for (const auto& [group, list] : counted) {
    GroupSamples g = group_samples(list);
    for (auto& [rank, samples] : g.late) {
      if (samples.size() <= late[rank].size()) continue;
      late[rank] = std::move(samples);
      step_of[rank] = g.step_ms;
    }
  }

  // Steps 3, 5, 6 for ranks.
  StragglerScores out;
  out.mode = o_.mode;
  out.window_s = std::chrono::duration<double>(o_.window).count();
  out.scored_at = now;
  std::map<int, std::vector<const RankLateness*>> on_node;
  std::set<int> nodes_found;
  std::vector<StragglerChange> rank_changes;
  for (const auto& [rank, place] : places) {
    RankLateness r;
    r.rank = rank;
    r.node = place.node;
    r.host = place.host;
    const auto it = late.find(rank);
    const bool scored = it != late.end() && static_cast<int>(it->second.size()) >= o_.min_samples;
    const std::optional<double> step = scored ? step_of[rank] : std::nullopt;
    if (scored) {
      r.lateness_ms = median_of(it->second);
      if (step) r.step_fraction = r.lateness_ms / *step;
    }
    const bool is_late = scored && r.lateness_ms >= o_.min_ms && (!step || r.lateness_ms >= o_.min_fraction * *step);
    Flag& f = rank_flags_[rank];
    bool found = false, recovered = false;
    double for_s = 0;
    step_flag(f, scored, is_late, now, found, recovered, for_s);
    r.straggler = f.flagged;
    if (f.since > 0) r.since = f.since;
    auto& h = history_[rank];
    if (scored) h.emplace_back(now, r.lateness_ms);
    std::erase_if(h, [&](const auto& p) { return p.first < now - static_cast<double>(o_.history.count()); });
    r.history = h;
    if (found || recovered) {
      rank_changes.push_back({found, false, rank, place.node, place.host, r.lateness_ms, r.step_fraction, for_s});
    }
    out.ranks.push_back(std::move(r));
  }

  // Step 7.
  for (const RankLateness& r : out.ranks) on_node[r.node].push_back(&r);
  for (const auto& [node, ranks] : on_node) {
    NodeLateness n;
    n.node = node;
    n.host = ranks.front()->host;
    std::vector<double> lates;
    int flagged = 0;
    for (const RankLateness* r : ranks) {
      if (!r->history.empty() && r->history.back().first == now) lates.push_back(r->lateness_ms);
      flagged += r->straggler ? 1 : 0;
    }
    const bool scored = !lates.empty();
    if (scored) n.lateness_ms = median_of(lates);
    const bool together = on_node.size() > 1 && flagged * 2 > static_cast<int>(ranks.size());
    Flag& f = node_flags_[node];
    // A node's flag follows its ranks' at once: their own flags already waited `persist` scorings.
    bool found = together && !f.flagged;
    bool recovered = !together && f.flagged;
    const double for_s = f.flagged ? now - f.since : 0;
    if (found) {
      f.since = now;
      for (const RankLateness* r : ranks) {
        if (r->since) f.since = std::min(f.since, *r->since);
      }
      nodes_found.insert(node);
    }
    f.flagged = together;
    n.straggler = f.flagged;
    if (f.flagged) n.since = f.since;
    if (found || recovered) {
      changes.push_back({found, true, -1, node, n.host, n.lateness_ms, std::nullopt, found ? now - f.since : for_s});
    }
    out.nodes.push_back(std::move(n));
  }
  // A node found says it for its ranks found with it: one line, not one per rank.
  for (StragglerChange& c : rank_changes) {
    if (!(c.found && nodes_found.count(c.node))) changes.push_back(std::move(c));
  }
  return out;
}

}  // namespace ddp::launcher
