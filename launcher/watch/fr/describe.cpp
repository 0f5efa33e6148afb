// describe_flight_records and user_frames (analysis.hpp): reading one rank at a time, for
// --dump_stacks and for the call sites of the analysis' reports.
#include <algorithm>

#include <fmt/format.h>

#include "launcher/watch/fr/analysis.hpp"
#include "launcher/watch/probe/report_time.hpp"

namespace ddp::launcher {
namespace {

// faulthandler's text, thread by thread: "Thread 0x... (most recent call first):" (or "Current
// thread ...", the worker server's own thread answering) then "  File ..." lines, a blank line
// between threads. The main thread is the one inside torch.distributed, else the last listed
// (faulthandler lists the newest threads first).
std::vector<std::string> thread_blocks(const std::string& traceback) {
  std::vector<std::string> blocks;
  std::size_t start = 0;
  while (start < traceback.size()) {
    std::size_t end = traceback.find("\n\n", start);
    if (end == std::string::npos) end = traceback.size();
    if (end > start) blocks.push_back(traceback.substr(start, end - start));
    start = end + 2;
  }
  return blocks;
}

std::string main_thread(const std::string& traceback) {
  const std::vector<std::string> blocks = thread_blocks(traceback);
  const std::string* last = nullptr;
  for (const std::string& b : blocks) {
    if (b.rfind("Current thread", 0) == 0) continue;
    if (b.find("/torch/distributed/") != std::string::npos) return b;
    last = &b;
  }
  if (last) return *last;
  return blocks.empty() ? std::string() : blocks.front();
}

bool torch_or_library(const std::string& line) {
  return line.find("/torch/") != std::string::npos || line.find("site-packages") != std::string::npos ||
         line.find("dist-packages") != std::string::npos || line.find("<frozen") != std::string::npos;
}

std::string group_state(const FrGroup& g, const std::vector<FrEntry>& entries, std::int64_t as_of_ns) {
  const FrEntry* waiting = nullptr;
  const FrEntry* last = nullptr;
  for (const FrEntry& e : entries) {
    if (e.group_id != g.id) continue;
    if (!e.completed && waiting == nullptr) waiting = &e;
    last = &e;
  }
  const std::string desc = readable_group_desc(g.desc);
  const std::string name =
      fmt::format("group {}{}", g.name.empty() ? "pg_id " + g.id : g.name, desc.empty() ? "" : " (" + desc + ")");
  if (waiting) {
    return fmt::format("{}: in {} {}#{} for {}", name, waiting->op, waiting->p2p ? "p2p " : "",
                       waiting->p2p ? waiting->p2p_seq : waiting->seq, time_between(waiting->created_ns, as_of_ns));
  }
  if (last) return fmt::format("{}: last {} #{} completed", name, last->op, last->p2p ? last->p2p_seq : last->seq);
  if (g.last_enqueued >= 0) return fmt::format("{}: last collective #{}", name, g.last_enqueued);
  return name + ": no collective yet";
}

}  // namespace

std::string user_frames(const std::string& traceback, int most) {
  const std::string thread = main_thread(traceback);
  std::string out;
  int n = 0;
  std::size_t start = 0;
  while (start < thread.size() && n < most) {
    std::size_t end = thread.find('\n', start);
    if (end == std::string::npos) end = thread.size();
    std::string line = thread.substr(start, end - start);
    start = end + 1;
    line.erase(0, line.find_first_not_of(' '));
    if (line.rfind("File ", 0) != 0 || torch_or_library(line)) continue;
    out += line + "\n";
    ++n;
  }
  return out;
}

std::string describe_flight_records(const std::vector<RankFr>& input, std::int64_t now_ns) {
  std::vector<const RankFr*> ranks;
  for (const RankFr& r : input) ranks.push_back(&r);
  std::sort(ranks.begin(), ranks.end(), [](const RankFr* a, const RankFr* b) { return a->rank < b->rank; });
  std::string text;
  for (const RankFr* r : ranks) {
    std::string line;
    if (!r->reachable) {
      line = fmt::format("no flight record ({})", r->why_not.empty() ? "unreachable" : r->why_not);
    } else if (!r->fr.valid) {
      line = fmt::format("unreadable flight record ({})", r->fr.error);
    } else if (r->fr.groups.empty()) {
      line = "no process group yet";
    }
    for (const auto& [id, g] : r->fr.groups) {
      if (!r->reachable || !r->fr.valid) break;
      line += (line.empty() ? "" : "; ") + group_state(g, r->fr.entries, r->taken_ns ? r->taken_ns : now_ns);
    }
    text += fmt::format("  rank {}: {}\n", r->rank, line);
  }
  return text;
}

}  // namespace ddp::launcher
