// See collective_hang.hpp.
#include "launcher/watch/collective_hang.hpp"

#include <algorithm>
#include <iterator>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/rank_ranges.hpp"
#include "launcher/watch/probe/proc_stat.hpp"
#include "launcher/watch/probe/report_time.hpp"

namespace ddp::launcher {
namespace {

std::string who(const RankProgress& r) {
  return fmt::format("rank {} (node {}{}, pid {}, {})", r.rank, r.node, r.host.empty() ? "" : " on " + r.host, r.pid,
                     describe_state(r.state));
}

constexpr const char* kNoProgress = "publishes no progress (not built on the ddplaunch runtime)";

// The time a rank's lines are relative to: when its snapshot was taken, else the report's.
std::int64_t as_of(const RankProgress& r, std::int64_t report_ns) {
  return r.taken_ns ? r.taken_ns : report_ns;
}

// One line per rank: "  <rank, detailed: with node, host, pid and state>: <what>", where `what`
// says what a rank with progress does as of the time given, and kNoProgress stands for the rest.
template <class What>
std::string rank_lines(const std::vector<RankProgress>& ranks, std::int64_t report_ns, bool detailed, What what) {
  std::string text;
  for (const RankProgress& r : ranks) {
    const std::string state = r.progress.attached() ? what(r, as_of(r, report_ns)) : kNoProgress;
    text += fmt::format("  {}: {}\n", detailed ? who(r) : fmt::format("rank {}", r.rank), state);
  }
  return text;
}

std::string collective_name(CollectiveKind kind, std::uint64_t n) {
  return fmt::format("{} #{}", to_string(kind), n);
}

}  // namespace

std::string byte_size(std::uint64_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  if (bytes < 1024 * 1024) return fmt::format("{:.1f} KiB", static_cast<double>(bytes) / 1024);
  if (bytes < 1024ull * 1024 * 1024) return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1024 * 1024));
  return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
}

std::vector<RankProgress> read_progress(const ProgressTable& table, const std::map<int, WatchedWorker>& workers,
                                        int node, const std::string& host) {
  std::vector<RankProgress> out;
  for (const auto& [pid, w] : workers) {
    RankProgress r;
    r.rank = w.rank;
    r.node = node;
    r.host = host;
    r.pid = pid;
    r.state = read_proc_stat(pid).state;
    if (w.slot < table.slots()) r.progress = table.read(w.slot);  // reset between rounds
    r.taken_ns = realtime_ns();
    out.push_back(r);
  }
  return out;
}

std::string encode_progress(const std::vector<RankProgress>& ranks) {
  nlohmann::json out = nlohmann::json::array();
  for (const RankProgress& r : ranks) {
    const CollectiveProgress& p = r.progress;
    out.push_back({{"rank", r.rank},
                   {"node", r.node},
                   {"host", r.host},
                   {"pid", r.pid},
                   {"state", std::string(1, r.state ? r.state : '?')},
                   {"attached", p.attached()},
                   {"entered", p.entered},
                   {"completed", p.completed},
                   {"kind", static_cast<std::uint32_t>(p.kind)},
                   {"bytes", p.bytes},
                   {"entered_ns", p.entered_ns},
                   {"completed_ns", p.completed_ns},
                   {"taken_ns", r.taken_ns}});
  }
  return out.dump();
}

std::vector<RankProgress> decode_progress(const std::string& value) {
  std::vector<RankProgress> ranks;
  const nlohmann::json doc = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_array()) return ranks;
  for (const nlohmann::json& j : doc) {
    try {
      RankProgress r;
      r.rank = j.at("rank").get<int>();
      r.node = j.at("node").get<int>();
      r.host = j.at("host").get<std::string>();
      r.pid = j.at("pid").get<int>();
      const std::string state = j.at("state").get<std::string>();
      r.state = state.empty() || state == "?" ? 0 : state[0];
      CollectiveProgress& p = r.progress;
      p.pid = j.at("attached").get<bool>() ? r.pid : 0;
      p.entered = j.at("entered").get<std::uint64_t>();
      p.completed = j.at("completed").get<std::uint64_t>();
      const auto kind = j.at("kind").get<std::uint32_t>();
      p.kind = kind <= static_cast<std::uint32_t>(CollectiveKind::Barrier) ? static_cast<CollectiveKind>(kind)
                                                                           : CollectiveKind::None;
      p.bytes = j.at("bytes").get<std::uint64_t>();
      p.entered_ns = j.at("entered_ns").get<std::int64_t>();
      p.completed_ns = j.at("completed_ns").get<std::int64_t>();
      r.taken_ns = j.value("taken_ns", std::int64_t{0});
      ranks.push_back(std::move(r));
    } catch (const nlohmann::json::exception&) {
      // Not one of ours: skipped.
    }
  }
  return ranks;
}

namespace {

// The hung collective: the first rank (of `ranks`, in rank order) that entered the latest any
// rank entered; nullptr when no rank publishes progress.
const RankProgress* hung_in(const std::vector<RankProgress>& ranks) {
  std::uint64_t n = 0;
  for (const RankProgress& r : ranks) {
    if (r.progress.attached() && r.progress.entered > n) n = r.progress.entered;
  }
  for (const RankProgress& r : ranks) {
    if (r.progress.attached() && r.progress.entered == n) return &r;
  }
  return nullptr;
}

}  // namespace

std::optional<HungCollective> hung_collective(const std::vector<RankProgress>& input) {
  std::vector<RankProgress> ranks = input;
  std::sort(ranks.begin(), ranks.end(), [](const RankProgress& a, const RankProgress& b) { return a.rank < b.rank; });
  const RankProgress* first_in = hung_in(ranks);
  if (first_in == nullptr) return std::nullopt;
  const CollectiveProgress& hung = first_in->progress;
  HungCollective c;
  c.finding = "hang";
  c.group = "0";  // the runtime's collectives are the whole job's
  c.seq = static_cast<long long>(hung.entered);
  c.op = to_string(hung.kind);
  for (const RankProgress& r : ranks) {
    c.group_ranks.push_back(r.rank);
    if (!r.progress.attached()) continue;
    if (r.progress.entered == hung.entered && r.progress.inside()) c.waiting.push_back(r.rank);
    if (r.progress.entered < hung.entered) c.missing.push_back(r.rank);
  }
  c.calls.push_back({c.op, byte_size(hung.bytes), c.waiting, ""});
  return c;
}

std::string describe_hang(const std::vector<RankProgress>& input, std::int64_t report_ns) {
  std::vector<RankProgress> ranks = input;
  std::sort(ranks.begin(), ranks.end(), [](const RankProgress& a, const RankProgress& b) { return a.rank < b.rank; });
  const RankProgress* first_in = hung_in(ranks);
  const std::uint64_t n = first_in ? first_in->progress.entered : 0;
  if (first_in == nullptr) return "No rank publishes collective progress (none uses the ddplaunch runtime).\n";
  std::string text = fmt::format("Collective #{} ({}, {}) never completed:\n", n, to_string(first_in->progress.kind),
                                 byte_size(first_in->progress.bytes));
  std::vector<int> never;
  std::vector<std::string> never_where;
  text += rank_lines(ranks, report_ns, true, [&](const RankProgress& r, std::int64_t now_ns) -> std::string {
    const CollectiveProgress& p = r.progress;
    if (p.entered == n && p.inside()) {
      return fmt::format("waiting in it for {} (since {})", time_between(p.entered_ns, now_ns),
                         clock_time(p.entered_ns));
    }
    if (p.entered == n) return fmt::format("completed it {} ago", time_between(p.completed_ns, now_ns));
    never.push_back(r.rank);
    never_where.push_back(fmt::format("rank {} (node {}{})", r.rank, r.node, r.host.empty() ? "" : " on " + r.host));
    if (p.entered == 0) return "never entered it; it entered no collective at all";
    if (p.inside()) {
      return fmt::format("never entered it; it has been waiting in {} for {}", collective_name(p.kind, p.entered),
                         time_between(p.entered_ns, now_ns));
    }
    return fmt::format("never entered it; its last, {}, completed {} ago", collective_name(p.kind, p.entered),
                       time_between(p.completed_ns, now_ns));
  });
  if (!never.empty()) {
    text += fmt::format("Never entered collective #{}: {}\n", n,
                        never.size() <= 8 ? fmt::format("{}", fmt::join(never_where, ", ")) : ranks_phrase(never));
  }
  return text;
}

}  // namespace ddp::launcher

namespace ddp::launcher {

std::string describe_progress(const std::vector<RankProgress>& all, std::int64_t report_ns) {
  std::vector<RankProgress> ranks;
  std::copy_if(all.begin(), all.end(), std::back_inserter(ranks),
               [](const RankProgress& r) { return r.progress.attached(); });
  return rank_lines(ranks, report_ns, false, [](const RankProgress& r, std::int64_t now_ns) -> std::string {
    const CollectiveProgress& p = r.progress;
    if (p.entered == 0) return "no collective yet";
    if (p.inside()) {
      return fmt::format("in {} ({}) for {}", collective_name(p.kind, p.entered), byte_size(p.bytes),
                         time_between(p.entered_ns, now_ns));
    }
    return fmt::format("last {} completed {} ago", collective_name(p.kind, p.entered),
                       time_between(p.completed_ns, now_ns));
  });
}

}  // namespace ddp::launcher
