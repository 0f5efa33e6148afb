// See worker_watch.hpp.
#include "launcher/watch/worker_watch.hpp"

#include <fstream>

#include <fmt/format.h>
#include <boost/asio/post.hpp>

#include "common/log.hpp"
#include "launcher/watch/stack_dump.hpp"

namespace ddp::launcher {

WorkerWatch::WorkerWatch(boost::asio::io_context& io, WorkerWatchOptions options,
                         std::function<void(const HangReport&)> report_hang)
    : io_(io),
      o_(std::move(options)),
      on_hang_(std::move(report_hang)),
      progress_(ProgressTable::create(std::max(1, o_.local_workers))),
      stacks_timer_(io) {
  timers_ = WorkerTimers::create(io_, current_environment(), o_.run_dir, o_.python);
  if (o_.hang_timeout.count() > 0) {
    HangWatchOptions ho{o_.hang_timeout, o_.run_dir, o_.python, &progress_, o_.host};
    hang_ = std::make_unique<HangWatch>(io_, std::move(ho), [this](const HangReport& r) { on_hang(r); });
  }
}

WorkerWatch::~WorkerWatch() {
  join_gather();
}

std::string WorkerWatch::timer_file() const {
  return timers_ ? timers_->path() : "";
}

void WorkerWatch::started(int round, int group_rank, int nnodes, std::map<int, WatchedWorker> workers) {
  round_ = round;
  group_rank_ = group_rank;
  nnodes_ = nnodes;
  running_.clear();
  for (const auto& [pid, w] : workers) running_[pid] = w.rank;
  workers_ = workers;
  live_ = true;
  if (timers_) timers_->watch(running_);
  if (hang_) hang_->watch(std::move(workers), round_, group_rank_);
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
  join_gather();
  progress_.reset();  // every worker of the round is gone: the next round's start empty
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
  const std::string progress = encode_progress(local_progress());
  const std::string text =
      fmt::format("=== node {} ({}) ===\n{}", group_rank_, o_.host, dump_stacks(running_, StackDumpOptions{o_.python}));
  try {
    stacks_watcher_->answer(request, progress, text);
  } catch (const Error& e) {
    log::warning("--dump_stacks: could not answer request {}: {}", request, e.what());
  }
}

}  // namespace ddp::launcher

namespace ddp::launcher {

std::vector<RankProgress> WorkerWatch::local_progress() const {
  std::map<int, WatchedWorker> workers;
  for (const auto& [pid, w] : workers_) {
    if (running_.count(pid)) workers[pid] = w;
  }
  return read_progress(progress_, workers, group_rank_, o_.host);
}

void WorkerWatch::on_hang(HangReport report) {
  if (!report.collective) return on_hang_(report);
  if (nnodes_ <= 1 || !o_.real_processes) return report_collective_hang(std::move(report), {}, "");
  // The other nodes' ranks, through the store, on a thread: their answers come in seconds (they
  // take their stacks), and this loop must stay free to answer the request itself.
  join_gather();
  auto slot = std::make_shared<GatherStore>();
  gather_store_ = slot;
  gather_ = std::thread([this, report = std::move(report), slot, round = round_, g = group_rank_, nnodes = nnodes_] {
    std::vector<RankProgress> others;
    std::string stacks;
    try {
      auto store = o_.connect_job();
      {
        std::lock_guard<std::mutex> lock(slot->mutex);
        if (slot->stopped) return;
        slot->store = store;
      }
      const long long n = make_stacks_request(*store);
      for (int node = 0; node < nnodes; ++node) {
        if (node == g) continue;
        try {
          for (RankProgress& r : decode_progress(store->get(progress_key(n, node), std::chrono::seconds(10))))
            others.push_back(std::move(r));
          stacks += store->get(stacks_key(n, node), std::chrono::seconds(15));
        } catch (const Error& e) {
          stacks += fmt::format("=== node {} ===\n(no answer: {})\n", node, e.what());
        }
      }
    } catch (const std::exception& e) {
      stacks += fmt::format("(the other nodes could not be asked: {})\n", e.what());
    }
    boost::asio::post(io_, [this, report, others = std::move(others), stacks = std::move(stacks), round] {
      if (round == round_ && live_) report_collective_hang(report, others, stacks);
    });
  });
}

void WorkerWatch::report_collective_hang(HangReport report, const std::vector<RankProgress>& others,
                                         const std::string& other_stacks) {
  std::vector<RankProgress> all = report.progress;
  all.insert(all.end(), others.begin(), others.end());
  const std::string stacks =
      fmt::format("=== node {} ({}) ===\n{}{}", group_rank_, o_.host, report.stacks, other_stacks);
  report.stacks_file = fmt::format("{}/hang_round{}_node{}.txt", o_.run_dir, round_, group_rank_);
  const std::string body = describe_hang(all, realtime_ns());
  if (!(std::ofstream(report.stacks_file) << report.text << "\n" << body << "\n" << stacks)) report.stacks_file.clear();
  report.text = fmt::format("{}\n{}Stacks{}:\n{}", report.text, body,
                            report.stacks_file.empty() ? "" : " (also in " + report.stacks_file + ")", stacks);
  on_hang_(report);
}

void WorkerWatch::join_gather() {
  if (gather_store_) {
    std::lock_guard<std::mutex> lock(gather_store_->mutex);
    gather_store_->stopped = true;
    if (gather_store_->store) gather_store_->store->interrupt();
  }
  if (gather_.joinable()) gather_.join();
  gather_store_.reset();
}

}  // namespace ddp::launcher
