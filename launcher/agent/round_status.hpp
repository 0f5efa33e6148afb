// Where the current round stands on this node, and why it stops: the agent's state machine in
// one place. The agent asks for transitions; this class checks each one and keeps the little
// data that goes with them (the root cause, whether the job may restart, a stopping signal).
#pragma once

#include <optional>

#include "launcher/rdzv/outcome.hpp"

namespace ddp::launcher {

// Transitions (the only ones; anything else is a bug and aborts through DDP_ASSERT):
//   Over      → Joining    a round begins (the first, or a restart / a new elastic round)
//   Joining   → Running    the rendezvous returned and every worker started
//   Running   → Succeeded  every local worker exited 0; the node waits for the job's outcome
//   Joining, Running, Succeeded → Stopping   a local failure (or a start that failed), the job's
//                          failure outcome, a lost node or store, a stopping signal
//   Stopping  → Over       every local worker has exited
// A round that succeeds ends the job from Succeeded; it never goes to Over.
enum class RoundState { Joining, Running, Succeeded, Stopping, Over };

const char* to_string(RoundState state);

// Not thread-safe: the agent's loop thread only. Never blocks, never throws.
class RoundStatus {
 public:
  RoundState state() const { return state_; }
  // Whether events from helper threads still concern this round (false once it is over).
  bool live() const { return state_ != RoundState::Over; }
  bool stopping() const { return state_ == RoundState::Stopping; }
  // Whether stop() may be called: the round is joining, running or has succeeded. A second
  // cause, once stopping, is not a bug (failures race): callers check this and drop it.
  bool stoppable() const { return live() && !stopping(); }

  // Over → Joining. Forgets the previous round's cause; a stopping signal is kept (the job ends).
  void join();
  // Joining → Running.
  void run();
  // Running → Succeeded.
  void succeed();
  // Joining, Running or Succeeded → Stopping (see stoppable()), recording `cause` (its code is
  // the job's exit code, its summary is printed at the end) and whether a new round may follow.
  void stop(Outcome cause, bool restartable);
  // Stopping → Over.
  void end();

  // Records a stopping signal the launcher received; the first one wins. The workers get it
  // instead of SIGTERM, and the job ends with 128+N once the round is over, whatever the cause.
  void interrupt(int signo);
  int interrupted_by() const { return interrupted_by_; }

  // The round's root cause; set once stopping.
  const std::optional<Outcome>& cause() const { return cause_; }
  // Whether a new round may follow this one: false after an interrupt, a lost store or static
  // peer, or workers that could not start.
  bool restartable() const { return restartable_ && interrupted_by_ == 0; }

 private:
  void move(RoundState from_ok, RoundState to);

  RoundState state_ = RoundState::Over;
  std::optional<Outcome> cause_;
  bool restartable_ = true;
  int interrupted_by_ = 0;
};

}  // namespace ddp::launcher
