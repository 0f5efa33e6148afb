// See analysis.hpp. Each group is looked at on its own: its members' records side by side,
// collective by collective (#N) for the ones some rank still waits in, then its p2p ops.
#include "launcher/watch/fr/analysis.hpp"

#include <algorithm>
#include <regex>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "common/rank_ranges.hpp"
#include "launcher/watch/probe/report_time.hpp"

namespace ddp::launcher {
namespace {

// Ops whose inputs must match on every member (the others, all_to_all or gather, may differ).
bool inputs_must_match(const std::string& op) {
  static const std::set<std::string> kMatched{"all_reduce",
                                              "broadcast",
                                              "reduce",
                                              "all_gather",
                                              "all_gather_into_tensor",
                                              "_all_gather_base",
                                              "allgather",
                                              "allgather_into_tensor",
                                              "reduce_scatter",
                                              "reduce_scatter_tensor",
                                              "_reduce_scatter_base",
                                              "barrier",
                                              "allreduce",
                                              "allreduce_coalesced",
                                              "all_reduce_coalesced"};
  const std::size_t colon = op.find(':');
  return kMatched.count(colon == std::string::npos ? op : op.substr(colon + 1)) > 0;
}

std::string what(const FrEntry& e) {
  return fmt::format("{}, input {} {}", e.op, e.sizes, e.dtypes);
}

// One member of a group as its record (if any) shows it.
struct Member {
  int rank = 0;
  const RankFr* fr = nullptr;           // nullptr: not among the snapshots
  const FrGroup* group = nullptr;       // nullptr: its record has no such group
  std::vector<const FrEntry*> entries;  // of this group, oldest first

  // Its record is readable: taken now, or (reachable false) as of its last answer.
  bool known() const { return fr != nullptr && fr->fr.valid; }
  long long last_enqueued() const {
    long long n = group ? group->last_enqueued : -1;
    for (const FrEntry* e : entries) n = e->p2p ? n : std::max(n, e->seq);
    return n;
  }
  const FrEntry* collective(long long seq) const {
    for (const FrEntry* e : entries) {
      if (!e->p2p && e->seq == seq) return e;
    }
    return nullptr;
  }
  const FrEntry* last(bool p2p) const {
    for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
      if ((*it)->p2p == p2p) return *it;
    }
    return nullptr;
  }
};

struct GroupView {
  std::string name, desc, id;
  std::vector<Member> members;  // by rank
  std::vector<int> ranks() const {
    std::vector<int> out;
    for (const Member& m : members) out.push_back(m.rank);
    return out;
  }
};

bool name_less(const std::string& a, const std::string& b) {
  return std::make_tuple(a.size(), a) < std::make_tuple(b.size(), b);  // "2" before "10"
}

std::vector<GroupView> group_views(const std::vector<RankFr>& ranks) {
  std::map<std::string, std::set<int>> members;                      // name → ranks
  std::map<std::string, std::pair<std::string, std::string>> about;  // name → (desc, a pg_id)
  for (const RankFr& r : ranks) {
    if (!r.fr.valid) continue;
    for (const auto& [id, g] : r.fr.groups) {
      if (g.name.empty()) continue;
      members[g.name].insert(r.rank);
      members[g.name].insert(g.ranks.begin(), g.ranks.end());
      if (about[g.name].first.empty()) about[g.name] = {g.desc, id};
    }
  }
  for (auto& [name, set] : members) {
    if (name != "0" && about[name].first != "default_pg") continue;
    for (const RankFr& r : ranks) set.insert(r.rank);  // the default group: every rank given
  }
  std::vector<GroupView> views;
  for (const auto& [name, set] : members) {
    GroupView v{name, about[name].first, about[name].second, {}};
    for (int rank : set) {
      Member m;
      m.rank = rank;
      for (const RankFr& r : ranks) {
        if (r.rank == rank) m.fr = &r;
      }
      if (m.known()) {
        for (const auto& [id, g] : m.fr->fr.groups) {
          if (g.name == name) m.group = &g;
        }
        for (const FrEntry& e : m.fr->fr.entries) {
          if (e.group_name == name || (e.group_name.empty() && m.group && e.group_id == m.group->id))
            m.entries.push_back(&e);
        }
      }
      v.members.push_back(std::move(m));
    }
    views.push_back(std::move(v));
  }
  std::sort(views.begin(), views.end(),
            [](const GroupView& a, const GroupView& b) { return name_less(a.name, b.name); });
  return views;
}

std::int64_t as_of(const Member& m, std::int64_t now_ns) {
  return m.fr && m.fr->taken_ns ? m.fr->taken_ns : now_ns;
}

std::string who(const Member& m) {
  if (m.fr == nullptr) return fmt::format("rank {}", m.rank);
  const RankFr& r = *m.fr;
  return fmt::format("rank {} (node {}{}, pid {})", r.rank, r.node, r.host.empty() ? "" : " on " + r.host, r.pid);
}

std::string where(const Member& m) {
  if (m.fr == nullptr) return fmt::format("rank {}", m.rank);
  return fmt::format("rank {} (node {}{})", m.rank, m.fr->node, m.fr->host.empty() ? "" : " on " + m.fr->host);
}

std::string unknown(const Member& m) {
  if (m.fr == nullptr) return "unknown: not among the snapshots";
  if (!m.fr->reachable) return fmt::format("unknown: {}", m.fr->why_not.empty() ? "unreachable" : m.fr->why_not);
  return fmt::format("unknown: its flight record is unreadable ({})", m.fr->fr.error);
}

// Where a rank is: its entry's frames, else its main thread's innermost frames outside torch.
std::string call_site(const Member& m, const FrEntry* e, const std::string& indent) {
  std::string frames = e && !e->frames.empty() ? e->frames : (m.fr ? user_frames(m.fr->traceback, 3) : "");
  std::string out;
  std::size_t start = 0;
  for (int n = 0; start < frames.size() && n < 3; ++n) {
    const std::size_t end = frames.find('\n', start);
    out += indent + frames.substr(start, end - start) + "\n";
    start = end == std::string::npos ? frames.size() : end + 1;
  }
  return out;
}

std::string waiting_line(const FrEntry& e, std::int64_t as_of_ns) {
  return fmt::format("waiting in it for {} (since {})", time_between(e.created_ns, as_of_ns), clock_time(e.created_ns));
}

std::string header(const GroupView& v) {
  const std::string desc = readable_group_desc(v.desc);
  return fmt::format("process group {} ({}ranks {})", v.name, desc.empty() ? "" : desc + ", ", rank_ranges(v.ranks()));
}

// A finding before its text: the group, the operation some member waits in, and who waits.
struct Candidate {
  FrFindingKind kind = FrFindingKind::None;
  int order = 0;  // Desync, Hang, p2p Hang, Stuck
  std::size_t group = 0;
  long long seq = 0;
  const Member* waiter = nullptr;
  const FrEntry* entry = nullptr;  // the waiter's
};

bool waited(const Member& m, const FrEntry& e, std::int64_t threshold_ns, std::int64_t now_ns) {
  return !e.completed && as_of(m, now_ns) - e.created_ns >= threshold_ns;
}

// The variants of #seq among the members that entered it: key → (the entry, its ranks).
std::map<std::string, std::pair<const FrEntry*, std::vector<int>>> variants(const GroupView& v, long long seq) {
  std::map<std::string, std::pair<const FrEntry*, std::vector<int>>> out;
  for (const Member& m : v.members) {
    const FrEntry* e = m.known() ? m.collective(seq) : nullptr;
    if (e == nullptr) continue;
    auto& variant = out[inputs_must_match(e->op) ? what(*e) : e->op];
    if (variant.first == nullptr) variant.first = e;
    variant.second.push_back(m.rank);
  }
  return out;
}

void collective_candidates(const std::vector<GroupView>& views, std::size_t g, std::int64_t threshold_ns,
                           std::int64_t now_ns, std::vector<Candidate>& out) {
  const GroupView& v = views[g];
  std::map<long long, std::pair<const Member*, const FrEntry*>> seqs;  // #N → its first long waiter
  for (const Member& m : v.members) {
    for (const FrEntry* e : m.entries) {
      if (!e->p2p && waited(m, *e, threshold_ns, now_ns) && !seqs.count(e->seq)) seqs[e->seq] = {&m, e};
    }
  }
  for (const auto& [seq, waiter] : seqs) {
    Candidate c{FrFindingKind::Stuck, 3, g, seq, waiter.first, waiter.second};
    for (const Member& m : v.members) {
      const FrEntry* e = m.known() ? m.collective(seq) : nullptr;
      const bool completed = e ? e->completed : (m.group && m.group->last_completed >= seq);
      if (!m.known() || completed || (e == nullptr && m.last_enqueued() < seq))
        c = {FrFindingKind::Hang, 1, g, seq, waiter.first, waiter.second};
    }
    if (variants(v, seq).size() > 1) c = {FrFindingKind::Desync, 0, g, seq, waiter.first, waiter.second};
    out.push_back(c);
  }
}

void p2p_candidates(const std::vector<GroupView>& views, std::size_t g, std::int64_t threshold_ns, std::int64_t now_ns,
                    std::vector<Candidate>& out) {
  for (const Member& m : views[g].members) {
    for (const FrEntry* e : m.entries) {
      if (e->p2p && waited(m, *e, threshold_ns, now_ns)) {
        out.push_back({FrFindingKind::Hang, 2, g, e->p2p_seq, &m, e});
        break;
      }
    }
  }
}

// What a member did of collective #seq, as its record says.
std::string recorded_state(const Member& m, long long seq, bool desync, std::int64_t now_ns) {
  if (const FrEntry* e = m.collective(seq)) {
    if (e->completed) return desync ? fmt::format("completed it as {}", what(*e)) : "completed it";
    if (!desync) return waiting_line(*e, as_of(m, now_ns));
    return fmt::format("waiting in {} for {} (since {})", e->op, time_between(e->created_ns, as_of(m, now_ns)),
                       clock_time(e->created_ns));
  }
  if (m.fr->fr.entries.empty() && m.group != nullptr) {
    // Its counters only (a status kept from an earlier answer).
    if (m.group->last_completed >= seq) return "completed it";
    if (m.group->last_enqueued >= seq) return "waiting in it";
  }
  if (m.last_enqueued() >= seq) return "entered it (its record of it was overwritten)";
  const FrEntry* last = m.last(false);
  if (last == nullptr && m.last_enqueued() > 0) {
    return fmt::format("never entered it; its last was #{}", m.last_enqueued());  // its counters only
  }
  if (last == nullptr) return "never entered it; it entered no collective of this group";
  if (last->completed) return fmt::format("never entered it; its last, {} #{}, completed", last->op, last->seq);
  return fmt::format("never entered it; it is waiting in {} #{} for {}", last->op, last->seq,
                     time_between(last->created_ns, as_of(m, now_ns)));
}

// What a member did of collective #seq, for the member lines; a record kept from an earlier
// answer says so.
std::string member_state(const Member& m, long long seq, bool desync, std::int64_t now_ns) {
  if (!m.known()) return unknown(m);
  const std::string state = recorded_state(m, seq, desync, now_ns);
  return m.fr->reachable ? state : fmt::format("{} ({})", state, m.fr->why_not);
}

// "<who> at:\n<frames>" or "" when there are no frames.
std::string site_block(const Member& m, const FrEntry* e, const std::string& intro, const std::string& indent) {
  const std::string site = call_site(m, e, indent);
  return site.empty() ? "" : intro + " at:\n" + site;
}

std::string input_of(const FrEntry& e) {
  return e.sizes.empty() && e.dtypes.empty() ? "" : fmt::format("{} {}", e.sizes, e.dtypes);
}

// The member's Python line (its entry's frames, else its traceback's), for the record.
void note_line(FrFinding& f, const Member& m, const FrEntry* e) {
  const std::string line = python_line(call_site(m, e, ""));
  if (!line.empty()) f.lines[m.rank] = line;
}

std::string collective_text(const GroupView& v, const Candidate& c, FrFinding& f, std::int64_t now_ns) {
  std::string text;
  if (c.kind == FrFindingKind::Desync) {
    text = fmt::format("Collective #{} of {} differs between ranks (a desync):\n", c.seq, header(v));
    for (const auto& [key, variant] : variants(v, c.seq)) {
      const Member* first = nullptr;
      for (const Member& m : v.members) {
        if (m.rank == variant.second.front()) first = &m;
      }
      const std::string site = call_site(*first, variant.first, "    ");
      f.calls.push_back({variant.first->op, input_of(*variant.first), variant.second, python_line(site)});
      text += fmt::format("  {}: {}{}", what(*variant.first), ranks_phrase(variant.second),
                          site.empty()                 ? "\n"
                          : variant.second.size() == 1 ? ", at:\n" + site
                                                       : fmt::format(", rank {} at:\n{}", first->rank, site));
    }
  } else {
    text = fmt::format("Collective #{} of {} never completed{}: {}\n", c.seq, header(v),
                       c.kind == FrFindingKind::Stuck ? ", though every member entered it" : "", what(*c.entry));
  }
  std::vector<const Member*> never;
  for (const Member& m : v.members) {
    text += fmt::format("  {}: {}\n", who(m), member_state(m, c.seq, c.kind == FrFindingKind::Desync, now_ns));
    const FrEntry* e = m.known() ? m.collective(c.seq) : nullptr;
    if (e && !e->completed) f.waiting.push_back(m.rank);
    if (m.known() && e == nullptr && m.last_enqueued() < c.seq) never.push_back(&m);
    if (e && !e->completed) note_line(f, m, e);
  }
  for (const Member* m : never) {
    f.never_entered.push_back(m->rank);
    note_line(f, *m, nullptr);
  }
  if (c.kind != FrFindingKind::Desync)
    f.calls.push_back({c.entry->op, input_of(*c.entry), f.waiting, python_line(call_site(*c.waiter, c.entry, ""))});
  if (c.kind == FrFindingKind::Desync) return text;
  if (never.empty()) return text + site_block(*c.waiter, c.entry, fmt::format("{} waits", where(*c.waiter)), "  ");
  std::vector<std::string> names;
  for (const Member* m : never) names.push_back(where(*m));
  const std::string list =
      never.size() <= 8 ? fmt::format("{}", fmt::join(names, ", ")) : ranks_phrase(f.never_entered);
  if (never.size() == 1) {
    const std::string site = call_site(*never.front(), nullptr, "  ");
    return text +
           fmt::format("Never entered collective #{}: {}{}", c.seq, list, site.empty() ? "\n" : ", at:\n" + site);
  }
  text += fmt::format("Never entered collective #{}: {}\n", c.seq, list);
  for (std::size_t i = 0; i < never.size() && i < 4; ++i)
    text += site_block(*never[i], nullptr, fmt::format("  rank {}", never[i]->rank), "    ");
  return text;
}

std::string p2p_text(const GroupView& v, const Candidate& c, FrFinding& f, std::int64_t now_ns) {
  std::string text = fmt::format("Point-to-point {} (p2p #{}) of {} never completed: input {} {}\n", c.entry->op, c.seq,
                                 header(v), c.entry->sizes, c.entry->dtypes);
  f.waiting.push_back(c.waiter->rank);
  note_line(f, *c.waiter, c.entry);
  f.calls.push_back({c.entry->op, input_of(*c.entry), f.waiting, f.lines[c.waiter->rank]});
  for (const Member& m : v.members) {
    std::string state;
    const FrEntry* last = m.known() ? m.last(true) : nullptr;
    if (&m == c.waiter) {
      state = waiting_line(*c.entry, as_of(m, now_ns));
    } else if (!m.known()) {
      state = unknown(m);
    } else if (last == nullptr) {
      state = "it recorded no point-to-point op of this group";
    } else {
      state =
          fmt::format("its last point-to-point op, {} (p2p #{}), {}", last->op, last->p2p_seq,
                      last->completed ? "completed" : fmt::format("is waiting since {}", clock_time(last->created_ns)));
    }
    text += fmt::format("  {}: {}\n", who(m), state);
  }
  return text + site_block(*c.waiter, c.entry, fmt::format("{} waits", where(*c.waiter)), "  ");
}

}  // namespace

FrFinding analyse_flight_records(const std::vector<RankFr>& ranks, std::chrono::milliseconds waited_at_least,
                                 std::int64_t now_ns) {
  const std::vector<GroupView> views = group_views(ranks);
  const std::int64_t threshold_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(waited_at_least).count();
  std::vector<Candidate> candidates;
  for (std::size_t g = 0; g < views.size(); ++g) {
    collective_candidates(views, g, threshold_ns, now_ns, candidates);
    p2p_candidates(views, g, threshold_ns, now_ns, candidates);
  }
  FrFinding f;
  if (candidates.empty()) return f;
  const Candidate& c =
      *std::min_element(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
        return std::tie(a.order, a.group, a.seq) < std::tie(b.order, b.group, b.seq);
      });
  const GroupView& v = views[c.group];
  f.kind = c.kind;
  f.group_id = c.entry->group_id;
  f.group_name = v.name;
  f.group_ranks = v.ranks();
  f.group_desc = v.desc;
  f.p2p = c.order == 2;
  f.seq = c.seq;
  f.op = c.entry->op;
  f.text = c.order == 2 ? p2p_text(v, c, f, now_ns) : collective_text(v, c, f, now_ns);
  return f;
}

std::string finding_headline(const FrFinding& f) {
  const std::string group =
      fmt::format("process group {}{}", f.group_name,
                  f.group_ranks.empty() ? "" : fmt::format(" (ranks {})", rank_ranges(f.group_ranks)));
  const std::string who = f.waiting.size() == 1 ? fmt::format("rank {}", f.waiting.front())
                                                : fmt::format("ranks {}", rank_ranges(f.waiting));
  switch (f.kind) {
    case FrFindingKind::Desync:
      return fmt::format("the members of {} called different collectives as #{}", group, f.seq);
    case FrFindingKind::Hang:
      if (f.never_entered.empty()) {
        return fmt::format("{} waited in {} #{} of {}, which not every member is known to have entered", who, f.op,
                           f.seq, group);
      }
      return fmt::format("{} waited in {} #{} of {}, which {} never entered", who, f.op, f.seq, group,
                         f.never_entered.size() == 1 ? fmt::format("rank {}", f.never_entered.front())
                                                     : fmt::format("ranks {}", rank_ranges(f.never_entered)));
    case FrFindingKind::Stuck:
      return fmt::format("every member of {} entered {} #{} and none completed it", group, f.op, f.seq);
    case FrFindingKind::None:
      break;
  }
  return "";
}

std::string python_line(const std::string& frames) {
  const std::string first = frames.substr(0, frames.find('\n'));
  const std::size_t start = first.find_first_not_of(" \t");
  if (start == std::string::npos) return "";
  const std::string line = first.substr(start);
  static const std::regex kTraceback(R"re(^File "(.*)", line (\d+) in (.*)$)re");
  static const std::regex kRecorder(R"(^(.*):(\d+) in (.*)$)");
  std::smatch m;
  if (std::regex_match(line, m, kTraceback) || std::regex_match(line, m, kRecorder))
    return fmt::format("{}:{} {}", m[1].str(), m[2].str(), m[3].str());
  return line;
}

}  // namespace ddp::launcher
