// See fleet_launch.hpp.
#include "launcher/fleet/fleet_launch.hpp"

#include <sys/random.h>
#include <unistd.h>

#include <climits>
#include <csignal>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <fmt/format.h>

#include "common/exit_codes.hpp"
#include "common/log.hpp"
#include "launcher/fleet/control_channel.hpp"
#include "launcher/fleet/forwarded_env.hpp"
#include "launcher/fleet/preflight.hpp"
#include "launcher/fleet/ssh_session.hpp"
#include "launcher/rdzv/job_secret.hpp"

namespace ddp::launcher {
namespace {

constexpr std::chrono::seconds kPreflightBudget{20};
constexpr int kSshFailed = 255;  // ssh's own exit code for its failures

std::string random_hex(std::size_t bytes) {
  std::string raw(bytes, '\0');
  std::size_t got = 0;
  while (got < bytes) {
    const ssize_t n = ::getrandom(raw.data() + got, bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(fmt::format("getrandom: {}", std::strerror(errno)));
    got += static_cast<std::size_t>(n);
  }
  return to_hex(raw);
}

std::string read_text_file(const std::string& flag, const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError(fmt::format("{} {} cannot be read ({}); give a readable file", flag, path, std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string this_executable() {
  char path[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) throw Error(fmt::format("readlink /proc/self/exe: {}", std::strerror(errno)));
  return std::string(path, static_cast<std::size_t>(n));
}

FleetPlan make_plan(const LaunchConfig& c) {
  const FleetOptions& f = c.fleet;
  FleetPlan plan;
  plan.hosts = select_hosts(f.hostfile.empty() ? hosts_from_list(f.hosts)
                                               : parse_hostfile(read_text_file("--hostfile", f.hostfile), f.hostfile),
                            f.include, f.exclude);
  char cwd[PATH_MAX];
  if (::getcwd(cwd, sizeof cwd) == nullptr) throw Error(fmt::format("getcwd: {}", std::strerror(errno)));
  plan.cwd = cwd;
  plan.ddplaunch = f.remote_ddplaunch.empty() ? this_executable() : f.remote_ddplaunch;
  plan.master_addr = f.given_flags.count("--master_addr") > 0 ? c.master_addr : plan.hosts[0].name;
  plan.master_port = f.given_flags.count("--master_port") > 0 ? c.master_port : 29500;
  plan.run_id = f.given_flags.count("--rdzv_id") > 0 ? c.run_id : "fleet-" + random_hex(6);
  return plan;
}

Environment forwarded(const FleetOptions& f) {
  std::string file = f.env_file;
  if (file.empty() && ::access(".ddplaunch_env", R_OK) == 0) file = ".ddplaunch_env";
  return forwarded_environment(current_environment(), f.exports, file.empty() ? "" : read_text_file("--env_file", file),
                               file);
}

// The one write of a whole line to fd 1 or 2 (lines of different hosts never interleave).
void write_line(int stream, std::string_view line) {
  std::string text(line);
  text += '\n';
  std::string_view rest = text;
  while (!rest.empty()) {
    const ssize_t n = ::write(stream, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return;  // our own console is gone: nothing to tell it
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
}

// The job's exit code from each host's launcher's (-1: never ended): see fleet_launch.hpp, step 6.
int job_exit_code(const std::vector<std::unique_ptr<SshSession>>& sessions) {
  const int node0 = sessions[0]->exit_code();
  if (node0 >= 0 && node0 != kSshFailed) return node0;
  for (const auto& s : sessions) {
    if (s->exit_code() > 0 && s->exit_code() != kSshFailed) return s->exit_code();
  }
  for (const auto& s : sessions) {
    if (s->exit_code() == 0) return kExitFailure;  // node 0 lost, the others ended well: say it failed
  }
  log::error("the ssh connection to every host ended without a job exit code (ssh exit 255); see the lines above");
  return kExitFailure;
}

}  // namespace

int print_fleet_dry_run(const LaunchConfig& c) {
  const FleetPlan plan = make_plan(c);
  for (std::size_t i = 0; i < plan.hosts.size(); ++i) {
    std::cout << fmt::format("host {} (node {}): {}\n", plan.hosts[i].name, i,
                             printable_command(host_ssh_argv(c.fleet, plan, i)));
  }
  std::string names;
  for (const auto& [name, value] : forwarded(c.fleet)) names += " " + name + "=" + shell_quote(value);
  std::cout << "stdin of every host: the job secret (********, new at each launch) and the variables" << names << "\n";
  if (c.fleet.given_flags.count("--master_port") == 0) {
    std::cout << "(--master_port: node 0's host picks a free port at launch; 29500 shown)\n";
  }
  return kExitOk;
}

int run_fleet(const LaunchConfig& c) {
  const FleetOptions& f = c.fleet;
  FleetPlan plan = make_plan(c);
  const Environment env = forwarded(f);
  const Environment ssh_env = current_environment();
  const int asked_port = f.given_flags.count("--master_port") > 0 ? c.master_port : 0;
  const PreflightResult checked = run_preflight(f, plan, asked_port, ssh_env, kPreflightBudget);
  if (!checked.failures.empty()) {
    for (const std::string& line : checked.failures) log::error("{}", line);
    log::error("preflight failed on {} of {} hosts; nothing was started", checked.failures.size(), plan.hosts.size());
    return kExitUsage;
  }
  plan.master_port = checked.master_port;
  const std::string secret = random_hex(32);
  log::info("launching on {} hosts over ssh: node 0 on {} at {}:{}, run id {}", plan.hosts.size(), plan.hosts[0].name,
            plan.master_addr, plan.master_port, plan.run_id);

  boost::asio::io_context io;
  boost::asio::signal_set children(io, SIGCHLD);
  boost::asio::signal_set stops(io, SIGINT, SIGTERM, SIGHUP);
  boost::asio::steady_timer escalate(io);
  std::vector<std::unique_ptr<SshSession>> sessions;
  std::size_t ended = 0;
  int stop_signals = 0;
  bool lost_host = false;  // a static job's host lost its ssh connection: the job was stopped for it
  const bool elastic = c.min_nodes != c.max_nodes;
  for (std::size_t i = 0; i < plan.hosts.size(); ++i) {
    const std::string host = plan.hosts[i].name;
    sessions.push_back(std::make_unique<SshSession>(
        io, SshSessionOptions{host, host_ssh_argv(f, plan, i), ssh_env}, write_line,
        [&, host, i](int code) {
          if (code == kSshFailed && stop_signals == 0 && !lost_host) {
            // Nobody will start this node again: a static job cannot go on without it (the others
            // would wait for it until --rdzv_timeout), an elastic one goes on with the rest.
            lost_host = !elastic;
            log::error("host {} (node {}): the ssh connection ended (ssh exit 255); its launcher stops its part of "
                       "the job{}",
                       host, i, elastic ? "; the job goes on without it (elastic)" : ", and so does every other host");
            if (lost_host) {
              for (auto& s : sessions) s->send(control_signal_line(SIGTERM));
            }
          }
          if (++ended == sessions.size()) io.stop();
        }));
  }
  // Second and third stop signals, or a shutdown that takes too long: end of the channels, then SIGKILL to ssh.
  const auto close_all = [&] {
    for (auto& s : sessions) s->close_input();
  };
  const auto kill_all = [&] {
    for (auto& s : sessions) s->kill();
  };
  std::function<void()> wait_stops = [&] {
    stops.async_wait([&](const boost::system::error_code& ec, int signo) {
      if (ec) return;
      ++stop_signals;
      if (stop_signals == 1) {
        log::warning("{}: stopping the job on every host", signo == SIGINT ? "interrupted" : "terminated");
        for (auto& s : sessions) s->send(control_signal_line(signo == SIGINT ? SIGINT : SIGTERM));
        escalate.expires_after(c.shutdown_timeout + std::chrono::seconds(10));
        escalate.async_wait([&](const boost::system::error_code& e) {
          if (e) return;
          close_all();
          escalate.expires_after(std::chrono::seconds(10));
          escalate.async_wait([&](const boost::system::error_code& e2) {
            if (!e2) kill_all();
          });
        });
      } else if (stop_signals == 2) {
        close_all();
      } else {
        kill_all();
      }
      wait_stops();
    });
  };
  std::function<void()> wait_children = [&] {
    children.async_wait([&](const boost::system::error_code& ec, int) {
      if (ec) return;
      for (auto& s : sessions) s->reap();
      wait_children();
    });
  };
  wait_children();
  wait_stops();
  for (auto& s : sessions) {
    s->start();
    s->send(encode_controller_header(ControllerHeader{s->host(), secret, env}));
  }
  io.run();
  const int code = job_exit_code(sessions);
  // Stopped because a host was lost, not by a signal of the user's: a lost node's code.
  return lost_host && code == exit_code_for_signal(SIGTERM) ? kExitFailure : code;
}

}  // namespace ddp::launcher
