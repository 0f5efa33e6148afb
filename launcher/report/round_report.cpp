// See round_report.hpp.
#include "launcher/report/round_report.hpp"

namespace ddp::launcher {

const char* state_name(RankState state) {
  switch (state) {
    case RankState::Succeeded:
      return "succeeded";
    case RankState::Failed:
      return "failed";
    case RankState::Stopped:
      return "stopped";
  }
  return "failed";
}

std::chrono::system_clock::time_point RankOutcome::failed_at() const {
  if (record && record->timestamp) {
    // @record's timestamp has whole seconds: within the same second the exit time orders them.
    const std::chrono::system_clock::time_point own{std::chrono::seconds(*record->timestamp)};
    if (own < std::chrono::time_point_cast<std::chrono::seconds>(exited)) return own;
  }
  return exited;
}

void RoundReport::add(const WorkerResult& worker, RankState state, std::string death_note) {
  RankOutcome o;
  o.worker = worker;
  o.exited = std::chrono::system_clock::now();
  if (state != RankState::Succeeded) o.record = read_error_file(worker.error_file);
  // A worker that recorded its own exception failed, even if our SIGTERM ended it afterwards
  // (Python may still be shutting down after @record wrote the file).
  if (state == RankState::Stopped && o.record && !o.record->message.empty()) state = RankState::Failed;
  o.state = state;
  o.death_note = std::move(death_note);
  ranks_.push_back(std::move(o));
}

const RankOutcome* RoundReport::root_cause() const {
  const RankOutcome* root = nullptr;
  for (const RankOutcome& o : ranks_) {
    if (o.state == RankState::Failed && (!root || o.failed_at() < root->failed_at())) root = &o;
  }
  return root;
}

bool says_collective_timed_out(const std::string& text) {
  for (const char* phrase : {"Timed out waiting", "Watchdog caught collective operation timeout"}) {
    if (text.find(phrase) != std::string::npos) return true;
  }
  return false;
}

bool timed_out_in_collective(const RankOutcome& rank) {
  if (rank.record && says_collective_timed_out(rank.record->message)) return true;
  for (const std::string& line : rank.worker.stderr_tail) {
    if (says_collective_timed_out(line)) return true;
  }
  return false;
}

}  // namespace ddp::launcher
