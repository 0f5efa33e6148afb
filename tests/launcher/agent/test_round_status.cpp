// RoundStatus: the agent's round state machine, its transitions and the data kept beside them.
#include "launcher/agent/round_status.hpp"

#include <catch2/catch.hpp>

#include <csignal>

namespace {

using ddp::launcher::Outcome;
using ddp::launcher::RoundState;
using ddp::launcher::RoundStatus;

TEST_CASE("round status: a round that succeeds", "[round_status]") {
  RoundStatus r;
  CHECK(r.state() == RoundState::Over);
  CHECK_FALSE(r.live());
  r.join();
  CHECK(r.state() == RoundState::Joining);
  CHECK(r.stoppable());
  r.run();
  CHECK(r.state() == RoundState::Running);
  r.succeed();
  CHECK(r.state() == RoundState::Succeeded);
  CHECK(r.stoppable());  // the job's outcome may still be a failure elsewhere
  CHECK_FALSE(r.cause());
}

TEST_CASE("round status: the first cause stands and the next round forgets it", "[round_status]") {
  RoundStatus r;
  r.join();
  r.run();
  r.stop(Outcome::failure(3, "rank 1 failed", 0), true);
  CHECK(r.stopping());
  CHECK_FALSE(r.stoppable());
  REQUIRE(r.cause());
  CHECK(r.cause()->code == 3);
  CHECK(r.restartable());
  r.end();
  CHECK(r.state() == RoundState::Over);
  CHECK_FALSE(r.live());
  r.join();
  CHECK_FALSE(r.cause());
  CHECK(r.restartable());
}

TEST_CASE("round status: workers that could not start stop the round while joining", "[round_status]") {
  RoundStatus r;
  r.join();
  r.stop(Outcome::failure(2, "", 0), false);
  CHECK(r.stopping());
  CHECK_FALSE(r.restartable());
}

TEST_CASE("round status: a stopping signal wins over a restart and is kept", "[round_status]") {
  RoundStatus r;
  r.join();
  r.run();
  r.stop(Outcome::failure(4, "", 0), true);
  r.interrupt(SIGINT);
  r.interrupt(SIGTERM);  // the first one wins
  CHECK(r.interrupted_by() == SIGINT);
  CHECK_FALSE(r.restartable());
  CHECK(r.cause()->code == 4);  // the cause stays the root cause
  r.end();
  r.join();
  CHECK(r.interrupted_by() == SIGINT);
}

}  // namespace
