// How a round of the job ended, as the nodes tell each other through the store's
// "r<round>/outcome" key: the first node to fail (or to be stopped) compare-sets it, the last
// node to succeed sets success, and every node's outcome watcher acts on what it reads.
//
// Wire format, version 2 (one text value; the store never interprets it):
//   line 1: "ddplaunch-outcome 2 <kind> <code> <origin_node>"   kind: success | failure
//   line 2: the root cause as a record (root_cause.hpp: one line of JSON), empty when none (a
//           success, or a failure no record was made for)
//   rest:   the summary, any bytes (newlines included), printed by the other nodes.
// decode() accepts exactly what encode() writes: a success with code 0, no record and no summary,
// a failure with a code in 1..255, an origin node in -1..kMaxNodes, a record that decodes. It also
// accepts version 1 (ddplaunch before the record: no line 2), as a failure without a record.
// Anything else (a stranger's write, another program's key, a truncated value) throws
// OutcomeError, so a malformed value can never become exit 0.
// An older launcher (version 1 only) reads a version-2 value as malformed: it stops its workers
// and exits 1 with "not written by ddplaunch 1", never 0 and never a restart on its word. Every
// node of a job must run the same ddplaunch release (docs/store-and-protocol.md).
#pragma once

#include <optional>
#include <string>

#include "ddplaunch/common/error.hpp"

#include "launcher/config/launch_config.hpp"  // kMaxNodes
#include "launcher/rdzv/root_cause.hpp"

namespace ddp::launcher {

class OutcomeError : public Error {
 public:
  using Error::Error;
};

struct Outcome {
  enum class Kind { Success, Failure };

  Kind kind = Kind::Failure;
  int code = 1;          // the job's exit code: 0 for success, the root cause's 1..255 otherwise
  std::string summary;   // what the other nodes print ("" for success)
  int origin_node = -1;  // group rank of the node that set it; -1 when no node is to blame
  // The failure as fields (nullopt for a success, and for a version-1 value).
  std::optional<RootCause> root_cause;

  static Outcome success(int origin_node);
  static Outcome failure(int code, std::string summary, int origin_node, std::optional<RootCause> root = std::nullopt);
  bool succeeded() const { return kind == Kind::Success; }

  // Pure. Asserts the invariants above (a bug otherwise).
  std::string encode() const;
  // Pure. Throws OutcomeError naming what is wrong; the value is quoted, cut to 80 bytes, with
  // control and non-ASCII bytes escaped (\x1b), since a stranger may have written it.
  static Outcome decode(const std::string& value);
};

// `text` safe to print on a terminal: control bytes other than newline and tab (escape sequences,
// carriage returns, DEL) become \xNN, as a backslash does (\x5c). Pure.
std::string printable(const std::string& text);

}  // namespace ddp::launcher
