// See stack_notes.hpp.
#include "launcher/watch/stack_notes.hpp"

#include <vector>

#include <fmt/format.h>

#include "common/rank_ranges.hpp"

namespace ddp::launcher {
namespace {

// Why these Python ranks gave no Python line, and what would give them ("" when they did).
std::string no_python_note(const std::vector<int>& ranks, const StackReading& first, const StackDumpOptions& o) {
  std::vector<std::string> why;
  std::vector<std::string> fixes;
  if (!o.no_server.empty()) {
    why.push_back("the job runs with " + o.no_server);
    if (o.no_server == "--no_worker_server") fixes.push_back("drop --no_worker_server");
  } else {
    why.push_back("no worker server answered" + (first.server_error.empty() ? "" : " (" + first.server_error + ")"));
  }
  if (!first.spy_found) {
    why.push_back(o.python.empty() ? "py-spy is not on PATH"
                                   : fmt::format("py-spy is not installed (not beside {}, nor on PATH)", o.python));
    fixes.push_back("pip install py-spy into the workers' environment");
  } else {
    why.push_back("py-spy gave none (said above)");
  }
  std::string text = fmt::format("note: no Python lines for {}: {}", ranks_phrase(ranks), why[0]);
  for (std::size_t i = 1; i < why.size(); ++i) text += " and " + why[i];
  for (std::size_t i = 0; i < fixes.size(); ++i) text += (i == 0 ? "; " : ", or ") + fixes[i];
  return text + "\n";
}

}  // namespace

std::string stack_notes(const std::map<int, StackReading>& by_rank, const StackDumpOptions& options) {
  std::vector<int> no_python;
  const StackReading* first_no_python = nullptr;
  // One note per cause: ranks refused for the same reason by the same tool share it.
  std::map<std::string, std::pair<std::vector<int>, const StackReading*>> refused;
  for (const auto& [rank, r] : by_rank) {
    if (!r.denied_tool.empty()) {
      auto& [ranks, first] = refused[r.denied_tool + '\n' + r.denial.cause];
      ranks.push_back(rank);
      if (!first) first = &r;
    } else if (r.python && !r.python_frames) {
      no_python.push_back(rank);
      if (!first_no_python) first_no_python = &r;
    }
  }
  std::string text;
  if (first_no_python) text += no_python_note(no_python, *first_no_python, options);
  for (const auto& [key, entry] : refused) {
    const auto& [ranks, r] = entry;
    text += fmt::format("note: {} could not be read: {} may not ptrace {}: {}; {}\n", ranks_phrase(ranks),
                        r->denied_tool, ranks.size() == 1 ? "it" : "them", r->denial.cause, r->denial.fix);
  }
  return text;
}

}  // namespace ddp::launcher
