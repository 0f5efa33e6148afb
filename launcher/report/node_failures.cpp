// See node_failures.hpp.
#include "launcher/report/node_failures.hpp"

#include <charconv>

#include <fmt/format.h>

#include "ddplaunch/common/error.hpp"

namespace ddp::launcher {
namespace {
constexpr std::string_view kHeader = "ddplaunch-failure 2 ";
constexpr std::string_view kHeaderV1 = "ddplaunch-failure 1 ";  // before the record: still read

std::string key_of(const std::string& round_prefix, int node) {
  return round_prefix + "failed/" + std::to_string(node);
}
}  // namespace

std::string encode_node_failure(const NodeFailure& f) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(f.time.time_since_epoch()).count();
  return fmt::format("{}{}\n{}\n{}", kHeader, ms, f.root ? encode_root_cause(*f.root) : "", f.summary);
}

std::optional<NodeFailure> decode_node_failure(int node, const std::string& value) {
  const bool v1 = value.compare(0, kHeaderV1.size(), kHeaderV1) == 0;
  if (!v1 && value.compare(0, kHeader.size(), kHeader) != 0) return std::nullopt;
  const std::size_t end = value.find('\n', kHeader.size());
  if (end == std::string::npos) return std::nullopt;
  long long ms = 0;
  const char* first = value.data() + kHeader.size();
  const auto [ptr, ec] = std::from_chars(first, value.data() + end, ms);
  if (ec != std::errc() || ptr != value.data() + end || ms < 0) return std::nullopt;
  NodeFailure f;
  f.node = node;
  f.time = std::chrono::system_clock::time_point(std::chrono::milliseconds(ms));
  std::size_t body = end + 1;
  if (!v1) {
    const std::size_t record_end = value.find('\n', body);
    if (record_end == std::string::npos) return std::nullopt;
    if (record_end > body) {
      f.root = decode_root_cause(std::string_view(value).substr(body, record_end - body));
      if (!f.root) return std::nullopt;
    }
    body = record_end + 1;
  }
  f.summary = value.substr(body);
  return f;
}

void publish_node_failure(rendezvous::Store& job, const std::string& round_prefix, const NodeFailure& failure) {
  job.set(key_of(round_prefix, failure.node), encode_node_failure(failure));
}

std::optional<NodeFailure> earliest_other_failure(rendezvous::Store& job, const std::string& round_prefix, int self,
                                                  int nnodes) {
  std::optional<NodeFailure> earliest;
  for (int node = 0; node < nnodes; ++node) {
    if (node == self) continue;
    try {
      const std::string key = key_of(round_prefix, node);
      if (!job.check({key})) continue;
      const auto f = decode_node_failure(node, job.get(key, std::chrono::seconds(1)));
      if (f && (!earliest || f->time < earliest->time)) earliest = f;
    } catch (const Error&) {
      // Unreachable or a forged record: that node's word is missing from the comparison.
    }
  }
  return earliest;
}

}  // namespace ddp::launcher
