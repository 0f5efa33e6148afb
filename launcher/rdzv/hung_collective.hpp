// The collective a hang or desync is about, as a record (part of a root cause, root_cause.hpp):
// which process group, which collective (its #N), the op each call site called, which ranks wait
// in it and which never entered it, and the Python line each named rank is at. Built from the
// Flight Recorder analysis (watch/fr/analysis.hpp) or the ddplaunch runtime's progress table
// (watch/collective_hang.hpp, watch/hang_record.hpp); read as fields by --summary_json (run_recorder.hpp).
//
// Wire form: a JSON object, the "collective" member of the root cause's line. Unknown members are
// ignored; a member of the wrong type makes it unreadable (and with it the root cause).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace ddp::launcher {

// One way the members called the collective: a desync has several, a hang one.
struct CollectiveCall {
  std::string op;          // "gloo:all_reduce", or the runtime's "allreduce"
  std::string input;       // "[1000] Float" when the record says it; else ""
  std::vector<int> ranks;  // the ranks that called it so
  std::string line;        // where the first of them called it: "/tmp/fr/hang.py:8 <module>"; "" unknown
};

struct HungCollective {
  std::string finding;                // "hang", "desync" (members called different ops), "stuck" (all entered)
  std::string group;                  // the process group's name, the same on every rank ("0": the default)
  std::string group_desc;             // its description ("default_pg", new_group's group_desc); "" unknown
  std::vector<int> group_ranks;       // its members, as far as known
  long long seq = 0;                  // the collective's number in its group (#N); a p2p op's p2p number
  bool p2p = false;                   // a point-to-point op (send/recv), not a collective
  std::string op;                     // the op a waiting rank is in ("gloo:barrier")
  std::vector<CollectiveCall> calls;  // per call site
  std::vector<int> waiting;           // ranks waiting in it
  std::vector<int> missing;           // ranks known to have never entered it
  std::map<int, std::string> lines;   // rank → its Python line ("file:line function"), where known
};

// "gloo:barrier #2" (p2p: "gloo:send p2p #2"), as --dump_stacks and --status word it. Pure.
std::string op_name(const std::string& op, long long seq, bool p2p = false);

// The wire form and the inverse (nullopt for anything this could not have written). Pure; never
// throw (but std::bad_alloc).
nlohmann::json encode_hung_collective(const HungCollective& c);
std::optional<HungCollective> decode_hung_collective(const nlohmann::json& j);

}  // namespace ddp::launcher
