// See collective_watchdog.hpp.
#include "runtime/collective_watchdog.hpp"

#include "ddplaunch/rendezvous/error.hpp"

namespace ddp::runtime {

CollectiveWatchdog::CollectiveWatchdog(CollectiveWatchdogOptions options, CollectiveWatchdogHooks hooks)
    : options_(std::move(options)), hooks_(std::move(hooks)) {
  watcher_ = std::thread([this] { watch_loop(); });
  if (options_.listener_store) listener_ = std::thread([this] { listen_loop(); });
}

CollectiveWatchdog::~CollectiveWatchdog() {
  stop();
}

void CollectiveWatchdog::enqueued(std::uint64_t n, std::string what, std::function<bool()> done) {
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mutex_);
    if (stopping_ || !failure_.empty()) return;
    incoming_.push_back(
        Pending{n, std::move(what), std::move(done), now + options_.timeout, now + options_.timeout / 2, false});
  }
  wake_.notify_all();
}

std::string CollectiveWatchdog::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

void CollectiveWatchdog::fail(const std::string& message) {
  std::lock_guard once(fail_mutex_);
  {
    std::lock_guard lock(mutex_);
    if (!failure_.empty() || stopping_) return;  // one failure; none once closing
    failure_ = message;
  }
  wake_.notify_all();
  if (options_.store) {
    try {
      options_.store->compare_set(options_.failed_key, "", message);
    } catch (const std::exception&) {
      // The store may be gone with the failure; aborting still ends our side of the collective.
    }
  }
  if (hooks_.abort) hooks_.abort();
  if (hooks_.on_failure) hooks_.on_failure(message);
}

void CollectiveWatchdog::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (options_.listener_store) options_.listener_store->interrupt();
  std::lock_guard joining(join_mutex_);  // two threads stopping at once
  if (watcher_.joinable()) watcher_.join();
  if (listener_.joinable()) listener_.join();
}

void CollectiveWatchdog::watch_loop() {
  std::deque<Pending> pending;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      const auto over = [&] { return stopping_ || !failure_.empty(); };
      // Idle: sleep until work arrives. Work in flight: look again every `poll`.
      if (pending.empty() && incoming_.empty()) {
        wake_.wait(lock, [&] { return over() || !incoming_.empty(); });
      } else {
        wake_.wait_for(lock, options_.poll, over);
      }
      if (over()) return;
      for (Pending& p : incoming_) pending.push_back(std::move(p));
      incoming_.clear();
    }
    const std::string failure = check(pending);
    if (!failure.empty()) {
      fail(failure);
      return;
    }
  }
}

std::string CollectiveWatchdog::check(std::deque<Pending>& pending) {
  const std::string me = "rank " + std::to_string(options_.rank) + ": ";
  const auto in = [&] {
    return pending.empty()
               ? std::string()
               : " during " + pending.front().what + " (collective #" + std::to_string(pending.front().n) + ")";
  };
  try {
    while (!pending.empty() && pending.front().done()) pending.pop_front();
    const std::string async = hooks_.async_error ? hooks_.async_error() : std::string();
    if (!async.empty()) return me + "asynchronous communicator error" + in() + ": " + async;
  } catch (const std::exception& e) {
    return me + e.what() + in();
  }
  if (pending.empty()) return "";
  // Collectives complete in order: only the oldest can be late.
  Pending& oldest = pending.front();
  const auto now = std::chrono::steady_clock::now();
  if (!oldest.long_reported && now >= oldest.half) {
    oldest.long_reported = true;
    if (hooks_.long_wait) hooks_.long_wait(oldest.n);
  }
  if (now < oldest.deadline) return "";
  if (hooks_.timeout_message) return me + hooks_.timeout_message(oldest.n, oldest.what);
  return me + oldest.what + " (collective #" + std::to_string(oldest.n) + ") did not complete within " +
         std::to_string(options_.timeout.count()) +
         " ms; a rank has not called the same collective, or its device is stuck";
}

void CollectiveWatchdog::listen_loop() {
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (stopping_ || !failure_.empty()) return;
    }
    try {
      options_.listener_store->wait({options_.failed_key}, std::chrono::hours(1));
    } catch (const rendezvous::TimeoutError&) {
      continue;  // nobody failed this hour: wait again
    } catch (const std::exception&) {
      // Interrupted by stop(), or the store is gone (its host ended): the deadline and the
      // communicator's own errors still end a stuck collective.
      return;
    }
    std::string first;
    try {
      first = options_.listener_store->get(options_.failed_key, std::chrono::seconds(10));
    } catch (const std::exception&) {
      return;
    }
    fail("rank " + std::to_string(options_.rank) + ": aborted because a peer failed (" + first + ")");
    return;
  }
}

}  // namespace ddp::runtime
