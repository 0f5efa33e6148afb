// See status_exchange.hpp.
#include "launcher/status/status_exchange.hpp"

#include <variant>

#include "common/log.hpp"
#include "ddplaunch/common/error.hpp"
#include "launcher/status/job_status_json.hpp"
#include "launcher/status/status_json.hpp"

namespace ddp::launcher {

std::string node_status_key(int group_rank) {
  return "status/node/" + std::to_string(group_rank);
}

StatusExchange::StatusExchange(const StatusBoard& board, StatusExchangeOptions options)
    : board_(board), o_(std::move(options)) {}

StatusExchange::~StatusExchange() {
  stop();
}

void StatusExchange::stop() {
  {
    std::lock_guard lock(mutex_);
    last_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void StatusExchange::on_event(const RoundEvent& event) {
  if (const auto* joined = std::get_if<RoundJoined>(&event)) {
    std::lock_guard lock(mutex_);
    if (last_) return;
    group_rank_ = joined->view.group_rank;
    nnodes_ = joined->view.nnodes();
    now_ = true;
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  } else if (std::holds_alternative<JobEnded>(event)) {
    std::lock_guard lock(mutex_);
    now_ = true;
  } else {
    return;
  }
  wake_.notify_all();
}

void StatusExchange::set_page_url(std::string url) {
  std::lock_guard lock(mutex_);
  page_url_ = std::move(url);
}

std::string StatusExchange::status() const {
  const std::string own = status_json(board_.snapshot());
  std::lock_guard lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  if (group_rank_ == 0 && now - asked_ >= kWatched) {  // read again after a while: gather now
    now_ = true;
    wake_.notify_all();
  }
  asked_ = now;
  if (group_rank_ == 0) return job_status_json(own, others_, nnodes_);
  return with_job_page(own, job_page_);
}

void StatusExchange::run() {
  std::shared_ptr<rendezvous::Store> store;
  std::unique_lock lock(mutex_);
  while (!stop_) {
    wake_.wait_for(lock, o_.interval, [this] { return last_ || now_; });
    stop_ = last_;  // this turn is the last
    now_ = false;
    const int g = group_rank_;
    const int n = nnodes_;
    const bool watched = std::chrono::steady_clock::now() - asked_ < kWatched;
    const bool last = stop_;
    lock.unlock();
    try {
      if (!store) store = o_.connect();
      exchange(*store, g, n, watched, last);
    } catch (const Error& e) {
      // The store is gone or slow: the page shows what was read last; the next turn reconnects.
      log::debug("status page: the store did not answer: {}", e.what());
      store.reset();
    }
    lock.lock();
  }
}

void StatusExchange::exchange(rendezvous::Store& store, int group_rank, int nnodes, bool watched, bool last) {
  constexpr std::chrono::seconds kTimeout(2);
  if (group_rank > 0) {
    // Published while node 0's page is read (its "wanted" turn changed), and once at the end.
    std::string wanted = store.check({kWantedKey}) ? store.get(kWantedKey, kTimeout) : "";
    if (wanted != wanted_ || last) store.set(node_status_key(group_rank), status_json(board_.snapshot()));
    wanted_ = std::move(wanted);
    if (job_page_read_.empty() && store.check({kJobPageKey})) {
      std::string page = store.get(kJobPageKey, kTimeout);
      std::lock_guard lock(mutex_);
      job_page_ = job_page_read_ = std::move(page);
    }
    return;
  }
  if (!watched || last) return;  // nobody reads node 0's page: nothing to gather
  std::string url;
  {
    std::lock_guard lock(mutex_);
    url = page_url_;
  }
  if (!url.empty() && url != url_published_) store.set(kJobPageKey, url_published_ = url);
  store.set(kWantedKey, std::to_string(++turn_));
  std::map<int, std::string> read;
  for (int g = 1; g < nnodes; ++g) {
    if (store.check({node_status_key(g)})) read[g] = store.get(node_status_key(g), kTimeout);
  }
  std::lock_guard lock(mutex_);
  others_ = std::move(read);
}

}  // namespace ddp::launcher
