// See stacks_request.hpp.
#include "launcher/watch/stacks_request.hpp"

#include <algorithm>
#include <iostream>
#include <mutex>

#include <fmt/format.h>

#include "common/exit_codes.hpp"
#include "common/log.hpp"
#include "launcher/rdzv/job_store.hpp"
#include "launcher/watch/collective_hang.hpp"

namespace ddp::launcher {

struct StacksWatcher::Shared {
  std::mutex mutex;
  bool stopped = false;
  std::shared_ptr<rendezvous::Store> waiting;    // the parked connection (interrupted by stop)
  std::shared_ptr<rendezvous::Store> answering;  // answers go on another connection
  StoreConnector connect;
  int group_rank = 0;
};

StacksWatcher::StacksWatcher(StoreConnector connect, int group_rank, int nnodes, OnRequest on_request)
    : shared_(std::make_shared<Shared>()) {
  shared_->connect = connect;
  shared_->group_rank = group_rank;
  thread_ = std::thread([shared = shared_, connect, group_rank, nnodes, on_request] {
    try {
      auto store = connect();
      {
        std::lock_guard<std::mutex> lock(shared->mutex);
        if (shared->stopped) return;
        shared->waiting = store;
      }
      if (group_rank == 0) store->set("stacks/nnodes", std::to_string(nnodes));
      // From the latest request on: one made while this watcher was starting (the nodes of a
      // round start theirs up to a moment apart) is still waiting for this node's answer. Older
      // ones have been given up by their clients.
      for (long long n = std::max<long long>(1, store->add("stacks/request", 0));; ++n) {
        store->wait({fmt::format("stacks/{}/req", n)}, std::chrono::milliseconds::max());
        on_request(n);
      }
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(shared->mutex);
      if (!shared->stopped) log::debug("--dump_stacks watcher stopped: {}", e.what());
    }
  });
}

StacksWatcher::~StacksWatcher() {
  {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    shared_->stopped = true;
    if (shared_->waiting) shared_->waiting->interrupt();
  }
  thread_.join();
}

std::string stacks_key(long long n, int g) {
  return fmt::format("stacks/{}/node/{}", n, g);
}

std::string progress_key(long long n, int g) {
  return fmt::format("stacks/{}/progress/{}", n, g);
}

std::string flight_records_key(long long n, int g) {
  return fmt::format("stacks/{}/fr/{}", n, g);
}

long long make_stacks_request(rendezvous::Store& job) {
  const long long n = job.add("stacks/request", 1);
  job.set(fmt::format("stacks/{}/req", n), "1");
  return n;
}

std::string read_key(long long n, int g) {
  return fmt::format("stacks/{}/read/{}", n, g);
}

void StacksWatcher::answer(long long n, const NodeAnswer& a) {
  std::shared_ptr<rendezvous::Store> store;
  {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    if (!shared_->answering) shared_->answering = shared_->connect();
    store = shared_->answering;
  }
  store->set(progress_key(n, shared_->group_rank), a.progress);
  store->set(flight_records_key(n, shared_->group_rank), a.flight_records);
  store->set(read_key(n, shared_->group_rank), fmt::format("{} {}", a.read, a.ranks));
  store->set(stacks_key(n, shared_->group_rank), a.stacks);
}

}  // namespace ddp::launcher
