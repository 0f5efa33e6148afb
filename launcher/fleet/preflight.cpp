// See preflight.hpp.
#include "launcher/fleet/preflight.hpp"

#include <csignal>
#include <memory>

#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <fmt/format.h>

#include "launcher/config/version.hpp"
#include "launcher/fleet/port_probe.hpp"
#include "launcher/fleet/ssh_session.hpp"

namespace ddp::launcher {
namespace {

// What one host answered.
struct Answer {
  std::string version, no_such, port_taken, unreachable, stderr_text;
  int listening = 0;
  bool reached = false;
  int code = -1;
};

// The preflight's command on a host: the working directory, the launcher, its version (from
// `--version`, which every ddplaunch answers, so an older one that lacks --fleet_probe is still
// named by its version), then, only when the version is this one's, its probe.
std::string probe_command(const FleetPlan& plan, std::size_t index, int port) {
  const std::string ddp = shell_quote(plan.ddplaunch);
  return fmt::format(
      "cd -- {0} 2>/dev/null || {{ echo '{1} no-cwd'; exit 0; }}; "
      "command -v {2} >/dev/null 2>&1 || {{ echo '{1} no-ddplaunch'; exit 0; }}; "
      "v=$({2} --version) || exit; echo \"{1} version ${{v#ddplaunch }}\"; [ \"$v\" = 'ddplaunch {6}' ] || exit 0; "
      "exec {2} --fleet_probe={3} --master_addr={4} --master_port={5}",
      shell_quote(plan.cwd), kProbeTag, ddp, index == 0 ? "listen" : "connect", shell_quote(plan.master_addr), port,
      kVersion);
}

bool contains(const std::string& text, const char* what) { return text.find(what) != std::string::npos; }

std::string last_line(const std::string& text) {
  std::string t = text;
  while (!t.empty() && t.back() == '\n') t.pop_back();
  const auto nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

std::string answer_failure(const FleetPlan& plan, const FleetOptions& f, std::size_t i, const Answer& a, int port) {
  const std::string& host = plan.hosts[i].name;
  if (a.code == 255) return ssh_failure_line(host, f, a.stderr_text);
  if (a.no_such == "no-cwd") {
    return fmt::format("host {}: the working directory {} is not there; create it or share it (NFS), or start from a "
                       "directory every host has",
                       host, plan.cwd);
  }
  if (a.no_such == "no-ddplaunch") {
    return fmt::format("host {}: {} is not there (or not executable); install the same ddplaunch there, or give its "
                       "path with --remote_ddplaunch",
                       host, plan.ddplaunch);
  }
  if (a.version.empty()) {
    return fmt::format("host {}: no answer from {} (ssh exit {}{}); run `ssh {} {} --version` to see why", host,
                       plan.ddplaunch, a.code, a.stderr_text.empty() ? "" : ": " + last_line(a.stderr_text), host,
                       plan.ddplaunch);
  }
  if (a.version != kVersion) {
    return fmt::format("host {}: ddplaunch there is version {}, here {}; install the same version on every host", host,
                       a.version, kVersion);
  }
  if (!a.port_taken.empty()) {
    return fmt::format("host {} (node 0): port {} is taken there ({}); give another --master_port", host, port,
                       a.port_taken);
  }
  if (!a.unreachable.empty()) {
    return fmt::format("host {}: cannot reach node 0 at {}; check that {} resolves there to {}'s address on the job's "
                       "network (not 127.0.1.1) and that no firewall blocks the port, or give --master_addr",
                       host, a.unreachable, plan.master_addr, plan.hosts[0].name);
  }
  return "";
}

}  // namespace

std::string ssh_failure_line(const std::string& host, const FleetOptions& f, const std::string& err) {
  const std::string port = f.ssh_port != 0 ? std::to_string(f.ssh_port) : "22 (or your ssh config's)";
  if (contains(err, "Permission denied") || contains(err, "password") || contains(err, "passphrase")) {
    return fmt::format("host {}: ssh asks for a password or refuses the key ({}); set up a key (ssh-copy-id {}) or an "
                       "agent",
                       host, last_line(err), host);
  }
  if (contains(err, "Connection refused")) {
    return fmt::format("host {}: nothing answers ssh on port {} (connection refused); start sshd there, or give "
                       "--ssh_port",
                       host, port);
  }
  if (contains(err, "Could not resolve") || contains(err, "Name or service not known")) {
    return fmt::format("host {}: the name does not resolve here; fix the hostfile, DNS or your ssh config", host);
  }
  if (contains(err, "Host key verification failed") || contains(err, "REMOTE HOST IDENTIFICATION")) {
    return fmt::format("host {}: ssh does not know (or no longer trusts) its host key; run `ssh {}` once to check and "
                       "accept it",
                       host, host);
  }
  if (contains(err, "timed out") || contains(err, "No route")) {
    return fmt::format("host {}: ssh cannot reach it on port {} ({}); check the address, the port and the firewall",
                       host, port, last_line(err));
  }
  return fmt::format("host {}: ssh failed (exit 255: {}); run `ssh {}` to see why", host,
                     err.empty() ? "no message" : last_line(err), host);
}

PreflightResult run_preflight(const FleetOptions& f, const FleetPlan& plan, int port, const Environment& ssh_env,
                              std::chrono::seconds budget) {
  boost::asio::io_context io;
  boost::asio::signal_set children(io, SIGCHLD);
  boost::asio::steady_timer deadline(io, budget);
  std::vector<Answer> answers(plan.hosts.size());
  std::vector<std::unique_ptr<SshSession>> sessions;
  std::size_t ended = 0;
  bool node0_listening = false;
  const auto others = [&](auto action) {
    for (std::size_t i = 1; i < sessions.size(); ++i) action(*sessions[i]);
  };
  const auto on_end = [&](std::size_t i, int code) {
    answers[i].code = code;
    ++ended;
    if (i == 0 && !node0_listening) others([](SshSession& s) { s.close_input(); });
    std::size_t others_ended = 0;
    for (std::size_t k = 1; k < sessions.size(); ++k) others_ended += sessions[k]->ended();
    if (others_ended + 1 == sessions.size()) sessions[0]->close_input();  // every host has tried: free the port
    if (ended == sessions.size()) io.stop();
  };
  const auto on_line = [&](std::size_t i, int stream, std::string_view line) {
    Answer& a = answers[i];
    if (stream == 2) {
      a.stderr_text += std::string(line) + "\n";
      return;
    }
    const std::string tag = std::string(kProbeTag) + " ";
    if (line.substr(0, tag.size()) != tag) return;
    const std::string what(line.substr(tag.size()));
    const auto rest = [&](std::size_t n) { return what.size() > n ? what.substr(n) : std::string(); };
    if (what.rfind("version ", 0) == 0) a.version = rest(8);
    else if (what == "no-cwd" || what == "no-ddplaunch") a.no_such = what;
    else if (what.rfind("port-taken ", 0) == 0) a.port_taken = rest(what.find(' ', 11) + 1);
    else if (what.rfind("unreachable ", 0) == 0) a.unreachable = rest(12);
    else if (what == "reached") a.reached = true;
    else if (what.rfind("listening ", 0) == 0) {
      a.listening = std::stoi(rest(10));
      node0_listening = true;
      const std::string go = fmt::format("go {}\n", a.listening);
      others([&go](SshSession& s) { s.send(go); });
      if (sessions.size() == 1) sessions[0]->close_input();
    }
  };
  for (std::size_t i = 0; i < plan.hosts.size(); ++i) {
    std::vector<std::string> argv = ssh_prefix(f, {"ConnectTimeout=10"});
    argv.push_back(plan.hosts[i].name);
    argv.push_back(probe_command(plan, i, i == 0 ? port : 0));
    sessions.push_back(std::make_unique<SshSession>(
        io, SshSessionOptions{plan.hosts[i].name, std::move(argv), ssh_env},
        [&on_line, i](int stream, std::string_view line) { on_line(i, stream, line); },
        [&on_end, i](int code) { on_end(i, code); }));
  }
  std::function<void()> wait_children = [&] {
    children.async_wait([&](const boost::system::error_code& ec, int) {
      if (ec) return;
      for (auto& s : sessions) s->reap();
      wait_children();
    });
  };
  wait_children();
  for (auto& s : sessions) s->start();
  bool timed_out = false;
  deadline.async_wait([&](const boost::system::error_code& ec) {
    if (ec) return;
    timed_out = true;
    io.stop();
  });
  io.run();
  PreflightResult result;
  result.master_port = answers[0].listening;
  for (std::size_t i = 0; i < sessions.size(); ++i) {
    if (timed_out && !sessions[i]->ended()) {
      result.failures.push_back(fmt::format("host {}: no answer within {} s (ssh stuck connecting, or a slow login); "
                                            "check `ssh {} true`",
                                            plan.hosts[i].name, budget.count(), plan.hosts[i].name));
      continue;
    }
    std::string line = answer_failure(plan, f, i, answers[i], port);
    if (line.empty() && i > 0 && node0_listening && !answers[i].reached) {
      line = fmt::format("host {}: did not try node 0's port (no answer); run `ssh {} {} --version`", plan.hosts[i].name,
                         plan.hosts[i].name, plan.ddplaunch);
    }
    if (!line.empty()) result.failures.push_back(std::move(line));
  }
  return result;  // sessions still running are killed and reaped by their destructors
}

}  // namespace ddp::launcher
