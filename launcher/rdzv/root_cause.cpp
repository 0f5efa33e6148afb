// See root_cause.hpp.
#include "launcher/rdzv/root_cause.hpp"

#include <array>
#include <cctype>
#include <utility>

#include <nlohmann/json.hpp>

#include "launcher/config/launch_config.hpp"  // kMaxNodes
#include "launcher/rdzv/json_member.hpp"

namespace ddp::launcher {
namespace {

using nlohmann::json;

constexpr std::array<std::pair<RootCause::Kind, const char*>, 7> kKinds{{
    {RootCause::Kind::Worker, "worker"},
    {RootCause::Kind::Hang, "hang"},
    {RootCause::Kind::NodeLost, "node_lost"},
    {RootCause::Kind::Interrupted, "interrupted"},
    {RootCause::Kind::NotStarted, "not_started"},
    {RootCause::Kind::StoreRecord, "store_record"},
    {RootCause::Kind::Reported, "reported"},
}};

std::optional<RootCause::Kind> kind_named(const std::string& name) {
  for (const auto& [kind, text] : kKinds) {
    if (name == text) return kind;
  }
  return std::nullopt;
}

long long epoch_ns(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

std::chrono::system_clock::time_point from_epoch_ns(long long ns) {
  return std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::nanoseconds(ns)));
}

}  // namespace

const char* kind_name(RootCause::Kind kind) {
  for (const auto& [k, text] : kKinds) {
    if (k == kind) return text;
  }
  return "worker";  // unreachable: every kind is in the table
}

std::string encode_root_cause(const RootCause& c) {
  json j{{"kind", kind_name(c.kind)},
         {"node", c.node},
         {"host", c.host},
         {"time_ns", epoch_ns(c.time)},
         {"reason", c.reason}};
  if (c.kind == RootCause::Kind::NodeLost) {
    j.update({{"lost_node", c.lost_node}, {"lost_host", c.lost_host}, {"silent_since_ns", epoch_ns(c.silent_since)}});
  }
  if (c.collective) j["collective"] = encode_hung_collective(*c.collective);
  if (c.kind == RootCause::Kind::Worker) {
    j.update({{"rank", c.rank},
              {"local_rank", c.local_rank},
              {"pid", c.pid},
              {"exit_code", c.exit_code},
              {"signal", c.signal},
              {"note", c.note},
              {"error_type", c.error_type},
              {"error", c.error},
              {"traceback", c.traceback},
              {"error_file", c.error_file},
              {"error_problem", c.error_problem},
              {"stderr_tail", c.stderr_tail},
              {"stderr_quiet_ms", static_cast<long long>(c.stderr_quiet.count())},
              {"collective_timeout", c.collective_timeout}});
  }
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::optional<RootCause> decode_root_cause(std::string_view line) {
  const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  RootCause c;
  std::string kind;
  long long ns = 0;
  long long silent_ns = 0;
  long long quiet_ms = 0;
  const bool typed = take_member(j, "kind", kind) && take_member(j, "node", c.node) && take_member(j, "host", c.host) &&
                     take_member(j, "time_ns", ns) && take_member(j, "reason", c.reason) && take_member(j, "rank", c.rank) &&
                     take_member(j, "local_rank", c.local_rank) && take_member(j, "pid", c.pid) &&
                     take_member(j, "exit_code", c.exit_code) && take_member(j, "signal", c.signal) && take_member(j, "note", c.note) &&
                     take_member(j, "error_type", c.error_type) && take_member(j, "error", c.error) &&
                     take_member(j, "traceback", c.traceback) && take_member(j, "error_file", c.error_file) &&
                     take_member(j, "error_problem", c.error_problem) && take_member(j, "stderr_tail", c.stderr_tail) &&
                     take_member(j, "collective_timeout", c.collective_timeout) && take_member(j, "lost_node", c.lost_node) &&
                     take_member(j, "lost_host", c.lost_host) && take_member(j, "silent_since_ns", silent_ns) &&
                     take_member(j, "stderr_quiet_ms", quiet_ms);
  if (!typed) return std::nullopt;
  if (const auto collective = j.find("collective"); collective != j.end()) {
    c.collective = decode_hung_collective(*collective);
    if (!c.collective) return std::nullopt;
  }
  const std::optional<RootCause::Kind> k = kind_named(kind);
  if (!k || c.node < -1 || c.node > kMaxNodes || ns < 0) return std::nullopt;
  if (c.lost_node < -1 || c.lost_node > kMaxNodes || silent_ns < 0 || quiet_ms < 0) return std::nullopt;
  c.stderr_quiet = std::chrono::milliseconds(quiet_ms);
  if (c.exit_code < 0 || c.exit_code > 255 || c.signal < 0 || c.signal > 64) return std::nullopt;
  c.kind = *k;
  c.time = from_epoch_ns(ns);
  c.silent_since = from_epoch_ns(silent_ns);
  return c;
}

std::string error_type_of(const std::string& message) {
  const std::size_t colon = message.find(": ");
  if (colon == 0 || colon == std::string::npos) return "";
  for (std::size_t i = 0; i < colon; ++i) {
    const auto ch = static_cast<unsigned char>(message[i]);
    if (!std::isalnum(ch) && ch != '_' && ch != '.') return "";
  }
  return message.substr(0, colon);
}

}  // namespace ddp::launcher
