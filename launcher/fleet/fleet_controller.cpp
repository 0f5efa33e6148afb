// See fleet_controller.hpp.
#include "launcher/fleet/fleet_controller.hpp"

#include <unistd.h>

#include <cerrno>
#include <csignal>

#include <fmt/format.h>

#include "common/exit_codes.hpp"
#include "common/log.hpp"
#include "launcher/fleet/control_channel.hpp"

namespace ddp::launcher {
namespace {

constexpr int kSshFailed = 255;  // ssh's own exit code for its failures

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

}  // namespace

FleetController::FleetController(const LaunchConfig& config, FleetControllerOptions options)
    : config_(config), options_(std::move(options)) {
  const FleetPlan& plan = options_.plan;
  for (std::size_t i = 0; i < plan.hosts.size(); ++i) {
    sessions_.push_back(std::make_unique<SshSession>(
        io_, SshSessionOptions{plan.hosts[i].name, host_ssh_argv(config_.fleet, plan, i), options_.ssh_env},
        write_line, [this, i](int code) { on_host_end(i, code); }));
  }
}

int FleetController::run() {
  wait_children();
  wait_stops();
  for (auto& s : sessions_) {
    s->start();
    s->send(encode_controller_header(ControllerHeader{s->host(), options_.secret, options_.forwarded}));
  }
  io_.run();
  const int code = exit_code();
  // Stopped because a host was lost, not by a signal of the user's: a lost node's code.
  return lost_host_ && code == exit_code_for_signal(SIGTERM) ? kExitFailure : code;
}

void FleetController::on_host_end(std::size_t i, int code) {
  if (code == kSshFailed && !told_to_stop_) {
    // Nobody will start this node again: a static job cannot go on without it (the others would
    // wait for it until --rdzv_timeout), an elastic one goes on with the rest, unless it is node
    // 0, whose launcher holds the job's store.
    const bool elastic = config_.min_nodes != config_.max_nodes && i != 0;
    lost_host_ = !elastic;
    log::error("host {} (node {}): the ssh connection ended (ssh exit 255); its launcher stops its part of the job{}",
               sessions_[i]->host(), i,
               elastic ? "; the job goes on without it (elastic)" : ", and so does every other host");
    if (lost_host_) tell_all(SIGTERM);
  } else if (i == 0 && code != 0 && !told_to_stop_ && ended_ + 1 < sessions_.size()) {
    // Node 0's launcher failed (a health check, the restarts used up, ...) and took the store
    // with it: a host still starting would wait for that store until --rdzv_timeout.
    log::warning("host {} (node 0) ended with exit {}, and the job's store with it: stopping the job on the other "
                 "hosts",
                 sessions_[0]->host(), code);
    tell_all(SIGTERM);
  }
  if (++ended_ == sessions_.size()) io_.stop();
}

void FleetController::tell_all(int signo) {
  told_to_stop_ = true;  // from now on a host's ssh exit 255 is its launcher stopping, not a lost host
  for (auto& s : sessions_) s->send(control_signal_line(signo));
}

// The first stop signal is told to every host (and, if the shutdown takes longer than
// --shutdown_timeout + 10 s, the channels are closed, and 10 s later ssh is killed); a second
// closes the channels (each host's launcher stops at once); a third kills ssh.
void FleetController::on_stop_signal(int signo) {
  ++stop_signals_;
  if (stop_signals_ == 1) {
    log::warning("{}: stopping the job on every host", signo == SIGINT ? "interrupted" : "terminated");
    tell_all(signo == SIGINT ? SIGINT : SIGTERM);
    escalate_.expires_after(config_.shutdown_timeout + std::chrono::seconds(10));
    escalate_.async_wait([this](const boost::system::error_code& ec) {
      if (ec) return;
      for (auto& s : sessions_) s->close_input();
      escalate_.expires_after(std::chrono::seconds(10));
      escalate_.async_wait([this](const boost::system::error_code& e) {
        if (e) return;
        for (auto& s : sessions_) s->kill();
      });
    });
  } else if (stop_signals_ == 2) {
    for (auto& s : sessions_) s->close_input();
  } else {
    for (auto& s : sessions_) s->kill();
  }
}

void FleetController::wait_children() {
  children_.async_wait([this](const boost::system::error_code& ec, int) {
    if (ec) return;
    for (auto& s : sessions_) s->reap();
    wait_children();
  });
}

void FleetController::wait_stops() {
  stops_.async_wait([this](const boost::system::error_code& ec, int signo) {
    if (ec) return;
    on_stop_signal(signo);
    wait_stops();
  });
}

int FleetController::exit_code() const {
  const int node0 = sessions_[0]->exit_code();
  if (node0 >= 0 && node0 != kSshFailed) return node0;
  for (const auto& s : sessions_) {
    if (s->exit_code() > 0 && s->exit_code() != kSshFailed) return s->exit_code();
  }
  for (const auto& s : sessions_) {
    if (s->exit_code() == 0) return kExitFailure;  // node 0 lost, the others ended well: say it failed
  }
  log::error("the ssh connection to every host ended without a job exit code (ssh exit 255); see the lines above");
  return kExitFailure;
}

}  // namespace ddp::launcher
