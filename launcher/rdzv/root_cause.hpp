// The root cause of a failed round as a record: who failed (rank, local rank, node, host), how
// (exit code, signal, error type and message, traceback, last stderr lines), when, and what kind
// of failure it was (a worker's, a hang, a lost node, a signal to the launcher, ...). It is built
// once, where the round's report is made (report/root_cause_of.hpp), travels between nodes beside
// the printed text (the outcome, outcome.hpp, and each node's failure record,
// report/node_failures.hpp), and is read as fields by the restart history, the short cause and
// the JSON summary. Nothing reads the printed summary back.
//
// Wire form: one line of JSON (an object; newlines inside strings are escaped), so it sits on one
// line of the outcome's value. Unknown members are ignored (a newer launcher may add some); a
// member of the wrong type, or a line that is not a JSON object, makes the record unreadable.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/rdzv/hung_collective.hpp"

namespace ddp::launcher {

struct RootCause {
  // What kind of failure ended the round.
  enum class Kind {
    Worker,       // a worker exited non-zero or died of a signal (the rank fields are set)
    Hang,         // --hang_timeout found a collective hang on `node`
    NodeLost,     // a node (or the store) was lost: its heartbeats or its connection stopped; `node`
                  // is the node that found it, `lost_node` the one that stopped answering
    Interrupted,  // the launcher on `node` received a stopping signal (SIGINT, SIGTERM, ...)
    NotStarted,   // `node` could not start its workers
    StoreRecord,  // the store held an outcome that ddplaunch did not write (no node to blame)
    Reported,     // another node's failure told without a record (an older launcher's outcome)
  };

  Kind kind = Kind::Worker;
  int node = -1;     // group rank of the node it happened on (-1: none to blame)
  std::string host;  // that node's host name, as it gave it ("" when unknown)
  std::chrono::system_clock::time_point time;
  // One line for kinds other than Worker: what stopped the round ("node 1 (h) lost: ...").
  std::string reason;

  // Kind::NodeLost only: the node that stopped answering (-1: the store, or not known), its host
  // ("" when unknown), and since when it was silent (its last heartbeat seen; the epoch when not
  // known). A rank's failure after that time is a consequence of the silence (root_cause_of.hpp).
  int lost_node = -1;
  std::string lost_host;
  std::chrono::system_clock::time_point silent_since;

  // The collective a hang is about (Kind::Hang: a Flight Recorder finding, or the ddplaunch
  // runtime's progress), or the one the Flight Recorders showed when a rank failed of a collective
  // timeout (Kind::Worker, collective_timeout): its group, #N, ops, waiting and missing ranks,
  // Python lines. nullopt when none was named.
  std::optional<HungCollective> collective;

  // Kind::Worker only.
  int rank = -1;
  int local_rank = -1;
  int pid = 0;
  int exit_code = 0;  // the code, or 128+N after signal N
  int signal = 0;     // N, or 0
  std::string note;   // why a signal came, when known ("out-of-memory: ...")
  std::string error_type;     // "ValueError" from "ValueError: boom"; "" when none
  std::string error;          // the worker's error message (its error file), "" when none
  std::string traceback;      // its traceback, "" when none
  std::string error_file;     // the file it was read from, "" when the worker wrote none
  std::string error_problem;  // why that file could not be used, "" when it could
  std::vector<std::string> stderr_tail;  // its last stderr lines
  std::chrono::milliseconds stderr_quiet{0};  // from the last of them to its exit (0: none, or not known)
  // Its error or stderr says a collective timed out (round_report.hpp, timed_out_in_collective):
  // the other nodes then gather their ranks' collectives before stopping.
  bool collective_timeout = false;
};

// "worker", "hang", "node_lost", "interrupted", "not_started", "store_record", "reported". Pure.
const char* kind_name(RootCause::Kind kind);

// The wire form above. Pure; never throws (but std::bad_alloc). Bytes that are not UTF-8 are
// replaced (U+FFFD).
std::string encode_root_cause(const RootCause& cause);
// nullopt for anything encode_root_cause() could not have written (a stranger's value, a cut
// line, a member of the wrong type or out of range). Pure; never throws (but std::bad_alloc).
std::optional<RootCause> decode_root_cause(std::string_view line);

// The type of an error message as Python words it: "ValueError" from "ValueError: boom",
// "torch.distributed.DistBackendError" from "torch.distributed.DistBackendError: ..."; "" when
// the message does not start with a dotted name followed by ": ". Pure.
std::string error_type_of(const std::string& message);

}  // namespace ddp::launcher
