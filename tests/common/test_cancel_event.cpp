// CancelEvent: not cancelled at first; cancel() makes fd() readable for every poll, from another
// thread too, and it stays so.
#include "common/cancel_event.hpp"

#include <catch2/catch.hpp>

#include <poll.h>

#include <thread>

TEST_CASE("a cancel wakes a poll blocked on another thread, and stays") {
  ddp::CancelEvent event;
  CHECK_FALSE(event.cancelled());
  int woke = -1;
  std::thread waiter([&] {
    pollfd p{event.fd(), POLLIN, 0};
    woke = ::poll(&p, 1, 10'000);  // bounded: a missed wake fails the check below, not the suite
  });
  event.cancel();
  waiter.join();
  CHECK(woke == 1);
  CHECK(event.cancelled());
  event.cancel();  // a second cancel changes nothing
  CHECK(event.cancelled());
}
