// See round_status.hpp.
#include "launcher/agent/round_status.hpp"

#include <fmt/format.h>

namespace ddp::launcher {

const char* to_string(RoundState state) {
  switch (state) {
    case RoundState::Joining:
      return "joining";
    case RoundState::Running:
      return "running";
    case RoundState::Succeeded:
      return "succeeded";
    case RoundState::Stopping:
      return "stopping";
    case RoundState::Over:
      return "over";
  }
  return "?";
}

void RoundStatus::move(RoundState from_ok, RoundState to) {
  DDP_ASSERT(state_ == from_ok, fmt::format("round state {} -> {}", to_string(state_), to_string(to)));
  state_ = to;
}

void RoundStatus::join() {
  move(RoundState::Over, RoundState::Joining);
  cause_.reset();
  restartable_ = true;
}

void RoundStatus::run() {
  move(RoundState::Joining, RoundState::Running);
}

void RoundStatus::succeed() {
  move(RoundState::Running, RoundState::Succeeded);
}

void RoundStatus::stop(Outcome cause, bool restartable) {
  DDP_ASSERT(stoppable(), fmt::format("round state {} -> stopping", to_string(state_)));
  state_ = RoundState::Stopping;
  cause_ = std::move(cause);
  restartable_ = restartable;
}

void RoundStatus::end() {
  move(RoundState::Stopping, RoundState::Over);
}

void RoundStatus::interrupt(int signo) {
  if (interrupted_by_ == 0) interrupted_by_ = signo;
}

}  // namespace ddp::launcher
