// Real worker processes for the agent: WorkerProcess objects (their output) in one ProcessSet
// (their lives), whose collect() runs on SIGCHLD.
#include <signal.h>

#include <algorithm>
#include <map>
#include <memory>

#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "launcher/workers/process_context.hpp"
#include "launcher/workers/worker_process.hpp"

namespace ddp::launcher {
namespace {

namespace asio = boost::asio;

class PosixProcessContext final : public ProcessContext {
 public:
  PosixProcessContext(asio::io_context& io, OutputPolicy policy, JobLifetime* lifetime)
      : io_(io), policy_(policy), lifetime_(lifetime), sigchld_(io, SIGCHLD) {
    if (lifetime_) lifetime_->adopt(processes_);
    wait_sigchld();
  }

  ~PosixProcessContext() override {
    // A SIGCHLD meant for another round's context may already have queued this context's
    // handler with success: cancelling cannot recall it, so the handler checks this flag.
    *alive_ = false;
    boost::system::error_code ignored;  // cancelling a signal set only fails if it is gone
    sigchld_.cancel(ignored);
    // processes_ (destroyed after the workers' pipes) kills and reaps whatever is left.
  }

  std::vector<int> start(const std::vector<WorkerSpec>& specs, ExitCallback on_exit) override {
    on_exit_ = std::move(on_exit);
    std::vector<int> pids;
    // One look at the handlers for the group, and each worker's exec waited for only at the end.
    ProcessSet::StartBatch batch = processes_.batch();
    try {
      for (const auto& spec : specs) {
        workers_.push_back(
            std::make_unique<WorkerProcess>(io_, spec, OutputOptions{policy_.console, policy_.log_tally}, processes_));
        WorkerProcess* w = workers_.back().get();
        pids.push_back(w->pid());
        if (lifetime_) lifetime_->worker_started(w->pid(), processes_);
        w->on_output_done([this, w] {
          ++pending_;
          asio::post(io_, [this, w] {
            --pending_;
            maybe_report(*w);
          });
        });
      }
      try {
        batch.finish();
      } catch (const ProcessSet::StartFailed& e) {
        for (const auto& w : workers_)
          if (w->index() == e.index()) throw worker_start_error(w->spec(), e);
        throw;
      }
    } catch (...) {
      if (lifetime_) lifetime_->flush();
      // Every child past its setpgid first (a child still before it would miss the SIGKILL to
      // its group); then nothing of a group that could not start completely keeps running.
      try {
        batch.finish();
      } catch (const StartError&) {
        // Reaped; the first error is the one on its way up.
      }
      processes_.signal_all(SIGKILL);
      for (auto& w : workers_) reported_.push_back(w.get());
      throw;
    }
    if (lifetime_) lifetime_->flush();  // the reaper learns of the whole group at once
    return pids;
  }

  void signal(int signo) override { processes_.signal_all(signo); }
  void notify(int signo) override { processes_.signal_each(signo); }

  std::size_t running() const override { return workers_.size() - reported_.size(); }

  std::vector<int> abandon_running() override {
    std::vector<int> pids;
    for (const pid_t pid : processes_.abandon_running()) {
      pids.push_back(pid);
      for (auto& w : workers_)
        if (w->pid() == pid) reported_.push_back(w.get());
    }
    return pids;
  }

  // The SIGCHLD wait is not counted: the destructor cancels it, and its handler, even one a
  // signal had already queued, then touches nothing of the context (alive_).
  bool settled() const override {
    // An abandoned worker never closes its output: the context settles without it.
    return running() == 0 && pending_ == 0 && std::all_of(workers_.begin(), workers_.end(), [](const auto& w) {
             return w->output_done() || !w->exited();
           });
  }

 private:
  void wait_sigchld() {
    sigchld_.async_wait([this, alive = alive_](const boost::system::error_code& ec, int) {
      if (ec || !*alive) return;
      for (const ProcessSet::Exit& exit : processes_.collect()) {
        // Before anything else: its group's number is still ours (the worker is a zombie).
        if (lifetime_) lifetime_->worker_exited(exit.pid);
        for (auto& w : workers_) {
          if (w->index() != exit.index) continue;
          w->set_exited(exit);
          maybe_report(*w);
        }
      }
      if (lifetime_) {
        lifetime_->flush();  // the exits of this batch, at once
        lifetime_->reap_orphans();
      }
      wait_sigchld();
    });
  }

  // Reports a worker once it has exited and its output is drained (so a failure summary comes
  // after the worker's last lines).
  void maybe_report(WorkerProcess& w, bool force = false) {
    if (!w.exited()) return;
    if (!w.output_done() && !force) {
      // A descendant that left the worker's process group may hold its pipes open for ever:
      // report the exit anyway after a short grace.
      auto timer = std::make_shared<asio::steady_timer>(io_, std::chrono::seconds(2));
      ++pending_;
      timer->async_wait([this, &w, timer](const boost::system::error_code& ec) {
        --pending_;
        if (!ec) maybe_report(w, true);
      });
      return;
    }
    if (std::find(reported_.begin(), reported_.end(), &w) != reported_.end()) return;
    reported_.push_back(&w);
    WorkerResult r;
    r.local_rank = w.spec().local_rank;
    r.rank = w.spec().rank;
    r.pid = w.pid();
    r.exit_code = w.exit_code();
    r.term_signal = w.term_signal();
    r.stderr_tail.assign(w.stderr_tail().begin(), w.stderr_tail().end());
    r.stderr_quiet = w.stderr_quiet();
    r.error_file = w.spec().error_file;
    // Every worker has ended and been reported: nothing is left to signal in their groups
    // that the round still cares about, so let their pids go.
    if (running() == 0) processes_.reap();
    if (on_exit_) on_exit_(r);
  }

  asio::io_context& io_;
  OutputPolicy policy_;
  JobLifetime* lifetime_;  // null: unsupervised (tests)
  asio::signal_set sigchld_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // false once destroyed (see the destructor)
  ProcessSet processes_;  // declared before workers_: outlives their pipes
  std::vector<std::unique_ptr<WorkerProcess>> workers_;
  std::vector<WorkerProcess*> reported_;
  ExitCallback on_exit_;
  int pending_ = 0;  // handlers of this context posted or waiting on a timer (settled())
};

}  // namespace

std::unique_ptr<ProcessContext> make_posix_process_context(asio::io_context& io, OutputPolicy policy) {
  return std::make_unique<PosixProcessContext>(io, policy, nullptr);
}

std::unique_ptr<ProcessContext> make_supervised_process_context(asio::io_context& io, OutputPolicy policy,
                                                                JobLifetime& lifetime) {
  return std::make_unique<PosixProcessContext>(io, policy, &lifetime);
}

}  // namespace ddp::launcher
