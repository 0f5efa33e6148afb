// What happened to each local worker in one round, as plain data: each rank's end (exit code or
// signal, its error file read once at exit, why a signal came) and which failure is the root
// cause: the earliest by its own timestamp (the error file's, which @record writes, else the time
// ddplaunch saw the exit). The words made from it are in failure_summary.hpp; the JSON in
// run_recorder.hpp. Not thread-safe: the agent's event loop only.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "launcher/rdzv/hung_collective.hpp"
#include "launcher/report/error_file.hpp"
#include "launcher/workers/process_context.hpp"

namespace ddp::launcher {

enum class RankState { Succeeded, Failed, Stopped };
const char* state_name(RankState state);  // "succeeded", "failed", "stopped"

struct RankOutcome {
  WorkerResult worker;
  RankState state = RankState::Failed;
  std::chrono::system_clock::time_point exited;  // when ddplaunch saw it exit
  std::optional<ErrorRecord> record;             // its error file, read at exit (nullopt: none)
  std::string death_note;                        // why a signal came, when known (oom_check.hpp)

  // The failure's own time: the error file's timestamp when the worker wrote one, else `exited`.
  std::chrono::system_clock::time_point failed_at() const;
};

// True when `text` (a worker's error or last stderr lines, or another node's summary) says a
// collective timed out: gloo's "Timed out waiting …ms for recv/send operation", the NCCL
// watchdog's "Watchdog caught collective operation timeout". Pure.
bool says_collective_timed_out(const std::string& text);
// The same for a rank's error record and stderr tail. Pure.
bool timed_out_in_collective(const RankOutcome& rank);

class RoundReport {
 public:
  // Forgets the previous round.
  void clear() {
    ranks_.clear();
    collectives_.clear();
    collective_record_.reset();
  }
  // Reads the worker's error file, once, for every rank that did not succeed (blocks on the file
  // system only). A worker given as Stopped whose error file holds an exception counts as Failed:
  // it raised before we stopped it. Never throws.
  void add(const WorkerResult& worker, RankState state, std::string death_note = "");
  const std::vector<RankOutcome>& ranks() const { return ranks_; }
  // The earliest failure (ties: the first seen); nullptr when no rank failed.
  const RankOutcome* root_cause() const;
  // What this node's ranks' Flight Recorders showed when the root cause failed, here or on
  // another node (a hang or a desync in a collective: worker_watch.hpp's
  // flight_records_at_failure()), "" when nothing; printed with the root cause, or with this
  // node's part of the summary; `record`, the collective they show as fields (nullopt: none).
  void set_collectives(std::string text, std::optional<HungCollective> record = std::nullopt) {
    collectives_ = std::move(text);
    collective_record_ = std::move(record);
  }
  const std::string& collectives() const { return collectives_; }
  const std::optional<HungCollective>& collective_record() const { return collective_record_; }

 private:
  std::vector<RankOutcome> ranks_;
  std::string collectives_;
  std::optional<HungCollective> collective_record_;
};

}  // namespace ddp::launcher
