// See worker_watch.hpp.
#include "launcher/watch/worker_watch.hpp"

#include <unistd.h>

#include <algorithm>
#include <fstream>

#include <fmt/format.h>
#include <boost/asio/post.hpp>

#include "common/format_duration.hpp"
#include "common/log.hpp"
#include "launcher/watch/fr/codec.hpp"
#include "launcher/watch/hang_record.hpp"
#include "launcher/workers/worker_spec.hpp"

namespace ddp::launcher {

WorkerWatch::WorkerWatch(boost::asio::io_context& io, WorkerWatchOptions options,
                         std::function<void(const HangReport&)> report_hang)
    : io_(io),
      o_(std::move(options)),
      on_hang_(std::move(report_hang)),
      progress_(ProgressTable::create(std::max(1, o_.local_workers))),
      stacks_timer_(io) {
  timers_ = WorkerTimers::create(io_, o_.env.empty() ? current_environment() : o_.env, o_.run_dir, o_.python);
  if (!o_.socket_dir.empty() && o_.real_processes) {
    FlightRecorderWatchOptions fo;
    fo.hang_timeout = o_.hang_timeout;
    fo.host = o_.host;
    flight_ = std::make_unique<FlightRecorderWatch>(
        std::move(fo), [this](std::vector<RankFr> local, std::chrono::milliseconds waited) {
          boost::asio::post(io_, [this, local = std::move(local), waited, round = round_]() mutable {
            if (round == round_ && live_) on_suspect(std::move(local), waited);
          });
        });
  }
  if (o_.hang_timeout.count() > 0) {
    HangWatchOptions ho{o_.hang_timeout, o_.run_dir, o_.python, &progress_, o_.host};
    ho.no_server = o_.no_server;
    // Where a Flight Recorder answers, it says exactly what hangs: no guessing from CPU time.
    if (flight_) ho.exact = [this] { return flight_->answering(); };
    if (flight_) ho.unavailable = [this] { return flight_->unavailable(); };
    ho.sockets = [this] { return sockets_; };
    hang_ = std::make_unique<HangWatch>(io_, std::move(ho), [this](const HangReport& r) { on_hang(r); });
  }
}

StackDumpOptions WorkerWatch::stack_options(std::chrono::milliseconds timeout) const {
  StackDumpOptions options{o_.python, timeout};
  options.sockets = sockets_;
  options.no_server = o_.no_server;
  return options;
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
  sockets_.clear();
  if (flight_) {
    std::vector<FrWorker> python;
    for (const auto& [pid, w] : workers) {
      sockets_[pid] = worker_socket_path(o_.socket_dir, w.slot);
      python.push_back({pid, w.rank, sockets_[pid]});
    }
    flight_->watch(std::move(python), group_rank_);
  }
  if (timers_) timers_->watch(running_);
  if (hang_) hang_->watch(std::move(workers), round_, group_rank_);
  watch_stack_requests();
}

std::string WorkerWatch::exited(int pid) {
  running_.erase(pid);
  if (const auto socket = sockets_.find(pid); socket != sockets_.end()) {
    // A worker killed (or ended by os._exit) leaves its socket: the next round's worker of this
    // local rank binds the same path.
    ::unlink(socket->second.c_str());  // ENOENT: it removed it itself at its exit
    ::unlink((socket->second + ".unavailable").c_str());
  }
  if (hang_) hang_->forget(pid);
  if (!timers_) return "";
  std::string note = timers_->note(pid);
  timers_->forget(pid);
  return note;
}

void WorkerWatch::stopping(bool failure) {
  live_ = false;
  if (hang_) hang_->stop();
  if (flight_) flight_->stop();
  // Only where the user asked for logs: taking stacks delays the teardown by tens of ms per
  // worker (bench section 2).
  if (!failure || running_.empty() || o_.temporary_run_dir || !o_.real_processes) return;
  const std::string path = fmt::format("{}/stacks_round{}_node{}.txt", o_.run_dir, round_, group_rank_);
  std::ofstream(path) << dump_stacks(running_, stack_options(std::chrono::seconds(3))).text;
  log::info("stacks of the {} worker(s) still running when the job stopped: {}", running_.size(), path);
}

std::optional<long long> WorkerWatch::collectives_completed() const {
  long long most = flight_ ? flight_->most_completed() : -1;
  for (int slot = 0; slot < progress_.slots(); ++slot) {
    const CollectiveProgress p = progress_.read(slot);
    if (p.attached() && p.completed > 0) most = std::max(most, static_cast<long long>(p.completed));
  }
  if (most <= 0) return std::nullopt;
  return most;
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
  std::vector<RankFr> records;
  if (flight_ && flight_->answering()) records = flight_->collect(false);
  const StacksDump dump = dump_stacks(running_, stack_options(std::chrono::seconds(10)));
  NodeAnswer a{progress, encode_rank_fr(records),
               fmt::format("=== node {} ({}) ===\n{}", group_rank_, o_.host, dump.text), dump.ranks, dump.read};
  if (!records.empty()) {
    a.stacks +=
        "last collectives (PyTorch's Flight Recorder):\n" + describe_flight_records(records, realtime_ns()) + "\n";
  }
  try {
    stacks_watcher_->answer(request, a);
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
  gather_other_nodes([this, report = std::move(report)](const OtherNodes& others) {
    report_collective_hang(report, others.progress, others.stacks);
  });
}

void WorkerWatch::gather_other_nodes(std::function<void(const OtherNodes&)> then) {
  // The other nodes' ranks, through the store, on a thread: their answers come in seconds (they
  // take their stacks), and this loop must stay free to answer the request itself.
  join_gather();
  auto slot = std::make_shared<GatherStore>();
  gather_store_ = slot;
  gather_ = std::thread([this, then = std::move(then), slot, round = round_, g = group_rank_, nnodes = nnodes_] {
    OtherNodes others;
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
            others.progress.push_back(std::move(r));
          for (RankFr& r : decode_rank_fr(store->get(flight_records_key(n, node), std::chrono::seconds(10))))
            others.flight_records.push_back(std::move(r));
          others.stacks += store->get(stacks_key(n, node), std::chrono::seconds(15));
        } catch (const Error& e) {
          others.stacks += fmt::format("=== node {} ===\n(no answer: {})\n", node, e.what());
        }
      }
    } catch (const std::exception& e) {
      others.stacks += fmt::format("(the other nodes could not be asked: {})\n", e.what());
    }
    boost::asio::post(io_, [this, then, others = std::move(others), round] {
      if (round == round_ && live_) then(others);
    });
  });
}

void WorkerWatch::on_suspect(std::vector<RankFr> local, std::chrono::milliseconds waited) {
  // The stacks the records came with; a rank whose server did not answer is read from outside.
  std::map<int, int> silent;
  for (const RankFr& r : local) {
    if (r.traceback.empty() && running_.count(r.pid)) silent[r.pid] = r.rank;
  }
  StackDumpOptions options = stack_options(std::chrono::seconds(3));
  options.sockets.clear();  // they did not answer
  std::string text = silent.empty() ? "" : dump_stacks(silent, options).text;
  std::sort(local.begin(), local.end(), [](const RankFr& a, const RankFr& b) { return a.rank < b.rank; });
  for (const RankFr& r : local) {
    if (!r.traceback.empty())
      text += fmt::format("rank {} (pid {}):\n{}\n\n", r.rank, r.pid, server_stack(r.traceback));
  }
  const std::string stacks = fmt::format("=== node {} ({}) ===\n{}", group_rank_, o_.host, text);
  if (nnodes_ <= 1) return check_flight_records(std::move(local), waited, stacks);
  gather_other_nodes([this, local = std::move(local), waited, stacks](const OtherNodes& others) {
    std::vector<RankFr> all = local;
    all.insert(all.end(), others.flight_records.begin(), others.flight_records.end());
    check_flight_records(std::move(all), waited, stacks + others.stacks);
  });
}

void WorkerWatch::check_flight_records(std::vector<RankFr> ranks, std::chrono::milliseconds waited,
                                       const std::string& stacks) {
  const FrFinding finding = analyse_flight_records(ranks, waited, realtime_ns());
  // A desync is a bug whenever it is seen; a hang is one only after --hang_timeout.
  const bool hang_check = o_.hang_timeout.count() > 0 && waited >= o_.hang_timeout;
  // The poll saw a rank wait that long; its record, read a moment later, tells exactly since when:
  // not yet, so check again (the next poll finds the check due).
  if (finding.kind == FrFindingKind::None && hang_check) return flight_->recheck();
  if (finding.kind == FrFindingKind::None || (finding.kind != FrFindingKind::Desync && !hang_check)) return;
  HangReport report;
  report.collective = true;
  report.record = hung_collective(finding);
  const std::string dumps = dump_flight_records();
  report.text =
      fmt::format("{}: {} (PyTorch's Flight Recorder{})", finding.kind == FrFindingKind::Desync ? "desync" : "hang",
                  finding_headline(finding), hang_check ? ", --hang_timeout " + format_seconds(o_.hang_timeout) : "");
  report.stacks_file = fmt::format("{}/hang_round{}_node{}.txt", o_.run_dir, round_, group_rank_);
  if (!(std::ofstream(report.stacks_file) << report.text << "\n" << finding.text << "\n" << dumps << stacks))
    report.stacks_file.clear();
  report.text = fmt::format("{}\n{}{}Python stacks{}:\n{}", report.text, finding.text, dumps,
                            report.stacks_file.empty() ? "" : " (also in " + report.stacks_file + ")", stacks);
  on_hang_(report);
}

std::string WorkerWatch::dump_flight_records() {
  // Each rank writes its own record in torch's format (ddplaunch_fr_dump), next to NCCL's
  // dump-on-timeout files: fr_trace reads them as they are.
  flight_->collect(true);
  return dumps_note();
}

std::string WorkerWatch::dumps_note() const {
  return fmt::format(
      "Flight Recorder dumps of this node's ranks that answered: {0}/fr_gloo_rank_<rank> (and fr_nccl_rank_<rank>)\n"
      "  torch's analyser: python -m torch.distributed.flight_recorder.fr_trace {0} --prefix fr_gloo_rank_\n",
      o_.run_dir);
}

CollectivesAtFailure WorkerWatch::flight_records_at_failure() {
  if (!flight_ || !flight_->answering()) return {};
  // Whatever a rank was waiting for when one failed counts: the failure ended the wait. No dumps
  // here: writing them would hold the teardown.
  std::vector<RankFr> ranks = flight_->collect(false);
  const FrFinding finding = analyse_flight_records(ranks, std::chrono::milliseconds(0), realtime_ns());
  if (finding.kind == FrFindingKind::None) return {};
  return {fmt::format("What the ranks' Flight Recorders show ({}):\n{}",
                      finding.kind == FrFindingKind::Desync ? "a desync" : "a hang", finding.text),
          hung_collective(finding)};
}

void WorkerWatch::report_collective_hang(HangReport report, const std::vector<RankProgress>& others,
                                         const std::string& other_stacks) {
  std::vector<RankProgress> all = report.progress;
  all.insert(all.end(), others.begin(), others.end());
  const std::string stacks =
      fmt::format("=== node {} ({}) ===\n{}{}", group_rank_, o_.host, report.stacks, other_stacks);
  report.stacks_file = fmt::format("{}/hang_round{}_node{}.txt", o_.run_dir, round_, group_rank_);
  const std::string body = describe_hang(all, realtime_ns());
  report.record = hung_collective(all);
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
