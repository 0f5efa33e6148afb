// PyTorch's Flight Recorder as its worker server gives it (`fr_trace_json`,
// watch/probe/worker_server.hpp), read into plain structs. The JSON, as torch 2.15 writes it
// (keys sorted, no spaces):
//   {"comm_lib_version":"", "entries":[{...}, ...], "nccl_comm_state":{}, "pg_config":{...},
//    "pg_status":{"<pg_id>":{"last_completed_collective":"3","last_enqueued_collective":"4",
//                            "last_started_collective":"-1"}, ...}, "version":"2.10"}
// How its parts name a process group (found on real gloo runs, see
// tests/launcher/watch/fr/fixtures/capture_fr.py):
//  - pg_id (pg_status's keys, each entry's "pg_id") counts the groups this process belongs to, in
//    the order it made them: it is process-local (new_group([1, 3]) is pg_id 1 on rank 1 and
//    rank 3, new_group([0, 1]) made next is pg_id 2 on rank 1 but pg_id 1 on rank 0).
//  - The group's name, each entry's "process_group"[0], is the same on every rank: "0" for the
//    default group, then "1", "2", ... in the order new_group was called (by every rank, members
//    or not). Its description is "process_group"[1]: "default_pg", "undefined" or new_group's
//    group_desc. A group this process recorded no entry of (none yet, or all overwritten in the
//    ring buffer) has no name here.
//  - pg_config, meant to give each group's ranks, is keyed by the name the group had when made,
//    which for gloo is "" for every group: it holds one entry, the last group made, and its ranks
//    are group-local (0..size-1), not global. Its ranks are used only when its key is a group's
//    name (global ranks, as NCCL records them) or when this process has one group (the default
//    group, where local ranks are global ranks); else FrGroup::ranks is empty (unknown).
//  - gloo marks a completed collective "retired": true (its "state" stays "scheduled"); it
//    records no send/recv at all, and no stack frames (the JSON handler has no option for them,
//    TORCH_FR_CPP_STACK=1 or not).
// Pure functions; never throw (but std::bad_alloc); thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ddp::launcher {

// One process group as one process recorded it.
struct FrGroup {
  std::string id;          // pg_id: process-local (see above)
  std::string name;        // the same on every rank ("0": the default group); "" if unknown here
  std::string desc;        // "default_pg", "undefined", new_group's group_desc
  std::vector<int> ranks;  // global ranks, when the record says them (see above); else empty
  long long last_enqueued = -1, last_started = -1, last_completed = -1;  // collective sequence numbers
};

// One collective or point-to-point operation.
struct FrEntry {
  std::string group_id;    // FrGroup::id
  std::string group_name;  // FrGroup::name
  long long seq = 0;       // collective_seq_id: #1, #2, ... in its group
  bool p2p = false;
  long long p2p_seq = 0;  // p2p_seq_id: its own count, not comparable with seq
  std::string op;         // "gloo:all_reduce"
  std::string sizes;      // "[1000]"; "[1000] -> [4, 1000]" when the output differs
  std::string dtypes;     // "Float"; "Float -> Half" when the output differs
  bool completed = false;
  std::int64_t created_ns = 0;  // CLOCK_REALTIME
  std::string frames;           // "file:line in func" lines, innermost first, if recorded (not by gloo)
};

struct FrSnapshot {
  bool valid = false;
  std::string error;                      // when !valid: why ("the flight record is not JSON: ...")
  std::map<std::string, FrGroup> groups;  // by FrGroup::id
  std::vector<FrEntry> entries;           // oldest first (parse_fr_trace only)
};

// The groups only, cheap enough to poll every second: the ~1 MB "entries" array of a full
// buffer is never parsed as a whole (only pg_config, pg_status and, from the newest entries back,
// each group's name are read), with a full parse as the fallback when the document is not laid
// out as torch writes it.
FrSnapshot parse_fr_status(const std::string& json);

// A group's description as a report prints it: "the default group" for "default_pg", "" for
// torch's "undefined" (a new_group given no group_desc) or none, else the group_desc. Pure.
std::string readable_group_desc(const std::string& desc);

// Everything: the groups and every entry.
FrSnapshot parse_fr_trace(const std::string& json);

}  // namespace ddp::launcher
