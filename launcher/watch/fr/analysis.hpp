// What went wrong between the ranks, read from every rank's Flight Recorder (recorder.hpp) taken
// through its worker server (watch/probe/worker_server.hpp): this node's ranks and, in a
// multi-node job, the other nodes' (shipped through the store, codec.hpp). Pure functions over
// snapshots; never throw (but std::bad_alloc); thread-safe.
//
// Process groups are matched across ranks by FrGroup::name (pg_id is process-local). A group's
// members are the global ranks its records say (FrGroup::ranks), every rank given for the default
// group "0", and every rank whose record has the group. A member that recorded nothing of a
// sub-group looks like a non-member: it is counted only where a record says its ranks. Give every
// rank of the job, those without a record too (reachable=false and why_not), so that the default
// group's members are all known by rank.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "launcher/watch/fr/recorder.hpp"

namespace ddp::launcher {

enum class FrFindingKind {
  None,
  Hang,    // a rank waits in #N of a group some member never entered, or whose members are not all
           // known, or that some member completed; or a p2p op never completed
  Desync,  // the members of a group called different collectives (or shapes) as #N
  Stuck,   // every member entered #N, the same way, and none completed it
};

// One rank's snapshot.
struct RankFr {
  int rank = 0;
  int node = 0;
  std::string host;
  int pid = 0;
  bool reachable = false;     // its worker server answered
  std::string why_not;        // when not: why ("no worker server socket", the client's error)
  FrSnapshot fr;              // parse_fr_trace of its answer
  std::string traceback;      // its dump_traceback answer ("" if none)
  std::int64_t taken_ns = 0;  // when (CLOCK_REALTIME ns); 0: unknown (the analysis' now_ns is used)
};

// One way the members called the collective (a desync has several).
struct FrCall {
  std::string op;          // "gloo:all_reduce"
  std::string input;       // "[1000] Float"; "" when the record says no sizes
  std::vector<int> ranks;  // who called it so
  std::string line;        // where the first of them did (python_line()); "" unknown
};

struct FrFinding {
  FrFindingKind kind = FrFindingKind::None;
  std::string group_id, group_name;  // group_id: the first waiting rank's pg_id; group_name: FrGroup::name
  std::vector<int> group_ranks;      // the members, as far as known
  long long seq = 0;                 // the collective's #N (a p2p op's own p2p sequence number)
  std::string op;                    // the first waiting rank's op ("gloo:all_reduce")
  std::vector<int> waiting;          // members waiting in it
  std::vector<int> never_entered;    // members known to have not entered it (Hang)
  std::string group_desc;            // FrGroup::desc ("default_pg"), "" unknown
  bool p2p = false;                  // a point-to-point op
  std::vector<FrCall> calls;         // a desync: each variant; else the waiting ranks' op
  std::map<int, std::string> lines;  // the waiting and never-entered ranks' Python lines, where known
  std::string text;                  // the report (analysis.hpp's top), "" for None
};

// The first of, in this order: a Desync, a Hang in a collective, a Hang in a p2p op, a Stuck
// collective; among the same kind, the lowest group name, then the lowest #N. Only a rank that has
// waited at least `waited_at_least` (as of its snapshot, else `now_ns`) in a collective makes a
// finding. Members not among `ranks`, unreachable or without a valid record are reported as
// unknown, never guessed. The text reads:
//   Collective #4 of process group 0 (default_pg, ranks 0-1) never completed: gloo:all_reduce, input [1000] Float
//     rank 0 (node 0 on vm, pid 100): waiting in it for 12.3 s (since 09:41:02.123 UTC)
//     rank 1 (node 0 on vm, pid 101): never entered it; its last, gloo:all_reduce #3, completed
//   Never entered collective #4: rank 1 (node 0 on vm), at:
//     File "/tmp/fr/hang.py", line 8 in <module>
// with the call sites taken from the innermost frames of each rank's main thread outside torch
// (its traceback) or from the entry's frames; a desync lists each variant, its ranks and where
// the first of them called it.
FrFinding analyse_flight_records(const std::vector<RankFr>& ranks, std::chrono::milliseconds waited_at_least,
                                 std::int64_t now_ns);

// The finding in one line, for the first line of a report: "rank 0 waited in gloo:all_reduce #4
// of process group 0 (ranks 0-1), which rank 1 never entered"; "" for None.
std::string finding_headline(const FrFinding& finding);

// One line per rank of its last collectives per group, for --dump_stacks:
//   "  rank 0: group 0 (the default group): in gloo:all_reduce #4 for 3.2 s; group 1: last gloo:broadcast #1
//   completed" "  rank 2: no flight record (no answer from /run/w2.sock to fr_trace_json within 2000 ms)"
std::string describe_flight_records(const std::vector<RankFr>& ranks, std::int64_t now_ns);

// The innermost frames (at most `most`) of the main thread of a dump_traceback text, outside
// torch and site-packages: "File \"/tmp/fr/hang.py\", line 8 in <module>" lines. "" if none.
std::string user_frames(const std::string& traceback, int most);

// "/tmp/fr/hang.py:8 <module>" from the first frame of `frames`: a dump_traceback line
// ('File "/tmp/fr/hang.py", line 8 in <module>') or a Flight Recorder frame ("/tmp/fr/hang.py:8
// in <module>"); the line as it is when it is neither, "" for none. Pure.
std::string python_line(const std::string& frames);

}  // namespace ddp::launcher
