// Starting a server's thread only once someone dials it: a watch, on another thread's event loop,
// of listening sockets, that calls back when the first connection waits to be accepted. A short
// job that nobody connects to then never starts the thread (one node's job store, the status
// endpoint): its launcher pays for neither creating nor joining it.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include <boost/asio/io_context.hpp>

namespace ddp {

class DialWatch {
 public:
  // Watches duplicates of `listening` (listening sockets; the descriptors stay the caller's) on
  // `loop`: `on_dial` runs once, on `loop`'s thread, when any of them has a connection waiting.
  // nullptr when a descriptor cannot be duplicated (out of descriptors): start the thread now.
  // Does not block; does not throw beyond std::bad_alloc.
  static std::unique_ptr<DialWatch> start(boost::asio::io_context& loop, const std::vector<int>& listening,
                                          std::function<void()> on_dial);
  // Stops watching; `on_dial` never runs after. On `loop`'s thread, or while `loop` does not run,
  // and before `loop` is destroyed.
  ~DialWatch();
  DialWatch(const DialWatch&) = delete;
  DialWatch& operator=(const DialWatch&) = delete;

 private:
  struct State;
  DialWatch() = default;
  std::shared_ptr<State> state_;  // the pending waits hold it weakly
};

}  // namespace ddp
