// See status_query.hpp.
#include "launcher/status/status_query.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <optional>
#include <variant>

#include <nlohmann/json.hpp>

#include "common/exit_codes.hpp"
#include "common/log.hpp"
#include "ddplaunch/common/env_lookup.hpp"
#include "launcher/config/file_flag.hpp"
#include "launcher/status/job_lookup.hpp"
#include "launcher/watch/probe/worker_server.hpp"

namespace ddp::launcher {
namespace {

constexpr std::chrono::seconds kAnswerTimeout{5};

// A reply's bytes for one line on stderr: at most 200, quoted as a JSON string with every control
// and non-ASCII byte escaped, since whatever listens on the socket chose them.
std::string quoted_excerpt(const std::string& text) {
  return nlohmann::json(text.substr(0, 200)).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
}

// nlohmann's dump escapes the C0 controls but passes DEL and the C1 controls (U+0080..U+009F,
// which terminals may obey as CSI and the like) as they are: escape those too, as JSON allows.
// Outside strings a dump has ASCII only, so the result is the same JSON.
std::string terminal_safe(const std::string& json) {
  std::string out;
  out.reserve(json.size());
  for (std::size_t i = 0; i < json.size(); ++i) {
    const auto b = static_cast<unsigned char>(json[i]);
    const auto next = i + 1 < json.size() ? static_cast<unsigned char>(json[i + 1]) : 0;
    if (b == 0x7f) {
      out += "\\u007f";
    } else if (b == 0xc2 && next >= 0x80 && next <= 0x9f) {  // UTF-8 for U+0080..U+009F
      out += fmt::format("\\u{:04x}", next);
      ++i;
    } else {
      out += json[i];
    }
  }
  return out;
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

std::string describe(const JobRecord& r) {
  return fmt::format("launcher pid {} of job '{}' (node {} of {}: {})", r.pid, r.run_id, r.node_rank, r.nnodes,
                     r.command);
}

// The socket to ask, from the registries (job_lookup.hpp); otherwise the exit code after the
// error lines (kExitUsage when several launchers could be meant).
std::variant<std::string, int> find_socket(const LaunchConfig& c) {
  const bool by_pid = all_digits(c.program);
  const std::string cwd = caller_cwd();
  const JobLookup lookup = look_up_job(process_env(), cwd, [&](const JobRecord& r) {
    if (r.status_socket.empty()) return false;  // a launcher without an endpoint (an older ddplaunch)
    if (by_pid) return std::to_string(r.pid) == c.program;
    return c.find_job || r.run_id == c.run_id;
  });
  const JobChoice& choice = lookup.choice;
  if (!choice.ambiguous.empty()) {
    return report_ambiguous(lookup, cwd, "--status", [](const JobRecord& r) { return std::to_string(r.pid); });
  }
  if (!choice.chosen) {
    const std::string which = by_pid       ? fmt::format("with pid {}", c.program)
                              : c.find_job ? std::string("of this user")
                                           : fmt::format("of job '{}'", c.run_id);
    log::error(
        "no running ddplaunch launcher {} on this machine (none in {}; a launcher registers a second after its "
        "workers start); give its status socket, <run dir>/status.sock, or ask its --status_port",
        which, lookup.places);
    return kExitFailure;
  }
  const JobRecord& chosen = *choice.chosen;
  for (const JobRecord& other : choice.others) {
    log::info("not asked: {}; ask it with ddplaunch --status {}", describe(other), other.pid);
  }
  if (!choice.others.empty()) log::info("asking {}", describe(chosen));
  return chosen.status_socket;
}

}  // namespace

int print_status(const LaunchConfig& c) {
  std::optional<std::string> socket;
  if (c.program.find('/') != std::string::npos) {
    socket = c.program;
    // Connecting to a FIFO or a file fails as a gone launcher's socket would; say what it is instead.
    const FoundFile found = find_file(*socket);
    if (found.error == 0 && !S_ISSOCK(found.mode)) {
      log::error("--status {}: this is {}, not a launcher's status socket; give <run dir>/status.sock of a running "
                 "launcher, its pid, or no value to find it",
                 *socket, file_kind(found.mode));
      return kExitUsage;
    }
  } else {
    auto found = find_socket(c);
    if (const int* exit_code = std::get_if<int>(&found)) return *exit_code;
    socket = std::get<std::string>(std::move(found));
  }
  const WorkerServerReply reply = ask_unix_http(*socket, false, "/status", "GET /status", kAnswerTimeout);
  if (!reply.ok && reply.status != 0) {  // reply.error would carry the body's bytes as they came
    log::error("{} answered GET /status with HTTP status {}: {}; is it a ddplaunch launcher's status socket?", *socket,
               reply.status, quoted_excerpt(reply.body));
    return kExitFailure;
  }
  if (!reply.ok) {
    log::error("{}; is the launcher still running?", reply.error);
    return kExitFailure;
  }
  const nlohmann::ordered_json doc = nlohmann::ordered_json::parse(reply.body, nullptr, false);
  if (doc.is_discarded()) {
    log::error("{} answered with something that is not JSON: {}", *socket, quoted_excerpt(reply.body));
    return kExitFailure;
  }
  std::cout << terminal_safe(doc.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace)) << std::endl;
  return kExitOk;
}

}  // namespace ddp::launcher
