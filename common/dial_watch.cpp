// See dial_watch.hpp.
#include "common/dial_watch.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <boost/asio/posix/stream_descriptor.hpp>

namespace ddp {

struct DialWatch::State {
  std::function<void()> on_dial;
  std::vector<std::unique_ptr<boost::asio::posix::stream_descriptor>> watches;
  bool fired = false;
};

std::unique_ptr<DialWatch> DialWatch::start(boost::asio::io_context& loop, const std::vector<int>& listening,
                                            std::function<void()> on_dial) {
  auto state = std::make_shared<State>();
  state->on_dial = std::move(on_dial);
  for (const int fd : listening) {
    const int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (copy < 0) return nullptr;  // the copies made so far close with `state`
    state->watches.push_back(std::make_unique<boost::asio::posix::stream_descriptor>(loop, copy));
  }
  for (auto& watch : state->watches) {
    watch->async_wait(boost::asio::posix::stream_descriptor::wait_read,
                      [weak = std::weak_ptr<State>(state)](const boost::system::error_code& ec) {
                        const auto s = weak.lock();
                        if (ec || !s || s->fired) return;
                        s->fired = true;
                        s->on_dial();
                      });
  }
  std::unique_ptr<DialWatch> watch(new DialWatch);
  watch->state_ = std::move(state);
  return watch;
}

DialWatch::~DialWatch() {
  // Closing the copies ends their waits (aborted); the handlers then find no state.
  state_.reset();
}

}  // namespace ddp
