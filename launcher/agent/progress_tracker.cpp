// See progress_tracker.hpp.
#include "launcher/agent/progress_tracker.hpp"

#include <charconv>
#include <sstream>
#include <string_view>

#include <fmt/format.h>

namespace ddp::launcher {
namespace {

constexpr std::string_view kNodeHeader = "ddplaunch-progress 1 ";
constexpr std::string_view kVerdictHeader = "ddplaunch-verdict 1 ";

std::optional<RoundProgress> from_word(std::string_view word) {
  for (RoundProgress p : {RoundProgress::Advanced, RoundProgress::Same, RoundProgress::Unknown}) {
    if (word == to_string(p)) return p;
  }
  return std::nullopt;
}

// "best before: 100", or "nothing before" for the first value seen.
std::string before(const std::optional<long long>& best, const char* prefix) {
  return best ? fmt::format("before: {}{}", prefix, *best) : std::string("first seen");
}

}  // namespace

const char* to_string(RoundProgress progress) {
  switch (progress) {
    case RoundProgress::Advanced:
      return "advanced";
    case RoundProgress::Same:
      return "none";
    case RoundProgress::Unknown:
      return "unknown";
  }
  return "?";
}

ProgressTracker::ProgressTracker(std::optional<ProgressFileReading> baseline) {
  if (baseline && baseline->known()) best_iteration_ = baseline->iteration;
}

NodeProgress ProgressTracker::measure(const std::optional<ProgressFileReading>& file,
                                      std::optional<long long> collectives) {
  NodeProgress out;
  // Both bests are kept up to date whichever source decides, so a source that speaks again
  // later is compared with everything it said before.
  if (file && file->known()) {
    const bool advanced = !best_iteration_ || file->iteration > *best_iteration_;
    out = {advanced ? RoundProgress::Advanced : RoundProgress::Same,
           fmt::format("iteration {} ({})", file->iteration, before(best_iteration_, ""))};
    if (advanced) best_iteration_ = file->iteration;
  }
  if (collectives) {
    const bool advanced = !best_collective_ || *collectives > *best_collective_;
    if (out.progress == RoundProgress::Unknown) {
      out = {advanced ? RoundProgress::Advanced : RoundProgress::Same,
             fmt::format("collective #{} completed ({})", *collectives, before(best_collective_, "#"))};
    }
    if (advanced) best_collective_ = collectives;
  }
  if (out.text.empty()) {
    const char* why = !file                                                ? "no --progress_file"
                      : file->state == ProgressFileReading::State::Missing ? "no --progress_file here"
                                                                           : "--progress_file unusable";
    out.text = fmt::format("nothing measured ({}, no collective seen)", why);
  }
  return out;
}

ProgressVerdict judge_round(const std::vector<std::optional<NodeProgress>>& nodes, bool is_restart,
                            int previous_streak) {
  ProgressVerdict v;
  bool any_same = false;
  bool any_advanced = false;
  bool any_missing = false;  // a node whose measure never came may have advanced
  for (std::size_t n = 0; n < nodes.size(); ++n) {
    const std::optional<NodeProgress>& p = nodes[n];
    any_same = any_same || (p && p->progress == RoundProgress::Same);
    any_advanced = any_advanced || (p && p->progress == RoundProgress::Advanced);
    any_missing = any_missing || !p;
    v.nodes.push_back(fmt::format("node {}: {}", n, p ? p->text : "its measure did not arrive"));
  }
  v.progress = any_advanced               ? RoundProgress::Advanced
               : any_same && !any_missing ? RoundProgress::Same
                                          : RoundProgress::Unknown;
  v.streak = is_restart && v.progress == RoundProgress::Same ? previous_streak + 1 : 0;
  return v;
}

std::string encode_node_progress(const NodeProgress& p) {
  return fmt::format("{}{}\n{}", kNodeHeader, to_string(p.progress), p.text);
}

std::optional<NodeProgress> decode_node_progress(const std::string& value) {
  if (value.compare(0, kNodeHeader.size(), kNodeHeader) != 0) return std::nullopt;
  const std::size_t nl = value.find('\n');
  if (nl == std::string::npos) return std::nullopt;
  const auto progress = from_word(std::string_view(value).substr(kNodeHeader.size(), nl - kNodeHeader.size()));
  if (!progress) return std::nullopt;
  return NodeProgress{*progress, value.substr(nl + 1)};
}

std::string encode_verdict(const ProgressVerdict& v) {
  std::string out = fmt::format("{}{} {}\n", kVerdictHeader, to_string(v.progress), v.streak);
  for (const std::string& line : v.nodes) out += line + "\n";
  return out;
}

std::optional<ProgressVerdict> decode_verdict(const std::string& value) {
  if (value.compare(0, kVerdictHeader.size(), kVerdictHeader) != 0) return std::nullopt;
  const std::size_t nl = value.find('\n');
  if (nl == std::string::npos) return std::nullopt;
  const std::string_view header = std::string_view(value).substr(kVerdictHeader.size(), nl - kVerdictHeader.size());
  const std::size_t space = header.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  const auto progress = from_word(header.substr(0, space));
  ProgressVerdict v;
  const std::string_view streak = header.substr(space + 1);
  const auto [ptr, ec] = std::from_chars(streak.data(), streak.data() + streak.size(), v.streak);
  if (!progress || ec != std::errc() || ptr != streak.data() + streak.size() || v.streak < 0) return std::nullopt;
  v.progress = *progress;
  std::istringstream lines(value.substr(nl + 1));
  for (std::string line; std::getline(lines, line);) v.nodes.push_back(line);
  return v;
}

}  // namespace ddp::launcher
