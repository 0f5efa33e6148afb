// The watchdog of a GPU communicator (issue 14, defects 2 and 3). A collective on the GPU returns
// to the host as soon as it is enqueued; the host later waits inside LibTorch (`loss.item()`,
// `.cpu()`), where no timeout applies. The watchdog owns what happens after the enqueue:
//   - a thread that, while collectives are in flight, polls each one's completion and the
//     communicator's asynchronous error (NCCL's ncclCommGetAsyncError: NCCL and CUDA offer no
//     host-side event for either, so this is a poll, every `poll` and only while work is in
//     flight; idle, the thread sleeps on a condition variable), records a long wait half-way to
//     the deadline (arrival records, for the timeout's message), and fails a collective that
//     outlives its deadline;
//   - a thread blocked in the store's wait for "<prefix>/failed" on a connection of its own (an
//     event, not a poll): another rank's failure aborts this one too, which NCCL requires (a
//     collective ends only when every rank has aborted).
// A failure, whichever finds it, is handled once: written to the failed key (first failure wins,
// so the peers learn of it), then `abort` (ncclCommAbort: ends this rank's collectives on the
// GPU), then `on_failure` with the message. The hooks keep this class free of CUDA: the unit
// tests drive it with fakes.
// Thread-safety: enqueued(), failure() and stop() may be called from any thread. The hooks run on
// the watchdog's threads, never concurrently with each other for `abort` and `on_failure`;
// `on_failure` must not call stop() (it would wait for its own thread).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "ddplaunch/rendezvous/store.hpp"

namespace ddp::runtime {

struct CollectiveWatchdogOptions {
  int rank = 0;
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};  // per collective, from its enqueue
  std::chrono::milliseconds poll{std::chrono::milliseconds(50)};
  // The communicator's store (its key space) for writing a failure; may be null (then nothing is
  // written). Must not be the listener's connection.
  std::shared_ptr<rendezvous::Store> store;
  // A connection of its own to the same key space, for the blocking wait on `failed_key`; null
  // turns the listener off (peers' failures then arrive only through NCCL or the deadline).
  std::shared_ptr<rendezvous::Store> listener_store;
  std::string failed_key = "failed";
};

struct CollectiveWatchdogHooks {
  // The communicator's asynchronous error, "" while healthy. May throw ddp::Error (taken as the
  // failure).
  std::function<std::string()> async_error;
  // Ends this rank's side of every collective in flight. Must not throw.
  std::function<void()> abort;
  // After abort, once, with the failure's message ("rank 1: ..."). Must not throw.
  std::function<void(const std::string&)> on_failure;
  // Collective #n has waited half its timeout (may be empty). Must not throw.
  std::function<void(std::uint64_t)> long_wait;
  // The message of collective #n's (`what`'s) timeout, after "rank R: " (may be empty: a generic
  // one is used).
  std::function<std::string(std::uint64_t n, const std::string& what)> timeout_message;
};

class CollectiveWatchdog {
 public:
  // Starts both threads. Does not block.
  CollectiveWatchdog(CollectiveWatchdogOptions options, CollectiveWatchdogHooks hooks);
  // stop().
  ~CollectiveWatchdog();
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;

  // Collective #n (`what`, e.g. "allreduce") was enqueued; `done` says whether it has completed
  // on the device (it may throw ddp::Error: a device error). Collectives complete in the order
  // they are enqueued. Never blocks for long; ignored after a failure or stop().
  void enqueued(std::uint64_t n, std::string what, std::function<bool()> done);
  // The failure's message once there was one, "" while healthy.
  std::string failure() const;
  // Reports a failure the caller found itself (handled once, as the watchdog's own; ignored
  // once stop() was called).
  void fail(const std::string& message);
  // Ends both threads and waits for them (the listener's store is interrupted). Idempotent.
  void stop();

 private:
  struct Pending {
    std::uint64_t n;
    std::string what;
    std::function<bool()> done;
    std::chrono::steady_clock::time_point deadline;
    std::chrono::steady_clock::time_point half;
    bool long_reported = false;
  };
  void watch_loop();
  void listen_loop();
  // One pass over the collectives in flight; returns a failure's message or "".
  std::string check(std::deque<Pending>& pending);

  CollectiveWatchdogOptions options_;
  CollectiveWatchdogHooks hooks_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Pending> incoming_;  // under mutex_: handed to the watch thread
  bool stopping_ = false;         // under mutex_
  std::string failure_;           // under mutex_
  std::mutex fail_mutex_;         // one failure handled at a time (abort, on_failure)
  std::mutex join_mutex_;         // stop() from two threads joins once
  std::thread watcher_;
  std::thread listener_;
};

}  // namespace ddp::runtime
