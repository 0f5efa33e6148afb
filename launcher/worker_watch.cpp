// See worker_watch.hpp.
#include "launcher/worker_watch.hpp"

#include <fstream>

#include <fmt/format.h>
#include <boost/asio/post.hpp>

#include "common/log.hpp"
#include "launcher/stack_dump.hpp"

namespace ddp::launcher {

WorkerWatch::WorkerWatch(boost::asio::io_context& io, WorkerWatchOptions options,
                         std::function<void(const HangReport&)> on_hang)
    : io_(io), o_(std::move(options)), stacks_timer_(io) {
  timers_ = WorkerTimers::create(io_, current_environment(), o_.run_dir, o_.python);
  if (o_.hang_timeout.count() > 0)
    hang_ = std::make_unique<HangWatch>(io_, HangWatchOptions{o_.hang_timeout, o_.run_dir, o_.python}, on_hang);
}

WorkerWatch::~WorkerWatch() = default;

std::string WorkerWatch::timer_file() const {
  return timers_ ? timers_->path() : "";
}

void WorkerWatch::started(int round, int group_rank, int nnodes, std::map<int, int> ranks_by_pid) {
  round_ = round;
  group_rank_ = group_rank;
  nnodes_ = nnodes;
  running_ = std::move(ranks_by_pid);
  live_ = true;
  if (timers_) timers_->watch(running_);
  if (hang_) hang_->watch(running_, round_);
  watch_stack_requests();
}

std::string WorkerWatch::exited(int pid) {
  running_.erase(pid);
  if (hang_) hang_->forget(pid);
  if (!timers_) return "";
  std::string note = timers_->note(pid);
  timers_->forget(pid);
  return note;
}

void WorkerWatch::stopping(bool failure) {
  live_ = false;
  if (hang_) hang_->stop();
  // Only where the user asked for logs: taking stacks delays the teardown by tens of ms per
  // worker (bench section 2).
  if (!failure || running_.empty() || o_.temporary_run_dir || !o_.real_processes) return;
  const std::string path = fmt::format("{}/stacks_round{}_node{}.txt", o_.run_dir, round_, group_rank_);
  std::ofstream(path) << dump_stacks(running_, StackDumpOptions{o_.python, std::chrono::seconds(3)});
  log::info("stacks of the {} worker(s) still running when the job stopped: {}", running_.size(), path);
}

void WorkerWatch::ended() {
  live_ = false;
  stacks_timer_.cancel();
  stacks_watcher_.reset();
}

void WorkerWatch::watch_stack_requests() {
  if (!o_.real_processes) return;  // fake processes and an in-process store (tests)
  stacks_timer_.expires_after(std::chrono::seconds(1));
  stacks_timer_.async_wait([this, round = round_](const boost::system::error_code& ec) {
    if (ec || round != round_ || !live_) return;
    stacks_watcher_ = std::make_unique<StacksWatcher>(o_.connect_job, group_rank_, nnodes_, [this, round](long long n) {
      boost::asio::post(io_, [this, round, n] {
        if (round == round_ && live_) answer(n);
      });
    });
  });
}

void WorkerWatch::answer(long long request) {
  const std::string text =
      fmt::format("=== node {} ({}) ===\n{}", group_rank_, o_.host, dump_stacks(running_, StackDumpOptions{o_.python}));
  try {
    stacks_watcher_->answer(request, text);
  } catch (const Error& e) {
    log::warning("--dump_stacks: could not answer request {}: {}", request, e.what());
  }
}

}  // namespace ddp::launcher
