// The hosts of a launch over ssh: read from a hostfile in DeepSpeed's format (`host slots=N`,
// `#` comments, blank lines) or from a Slurm-style host list (--hosts node[01-04]), then narrowed
// by --include / --exclude in DeepSpeed's syntax (`host[:slot,slot]@host`). The first host left
// is node 0. All pure (the hostfile's text is read by the caller); nothing blocks; thread-safe.
#pragma once

#include <string>
#include <vector>

namespace ddp::launcher {

struct FleetHost {
  std::string name;        // as the hostfile gives it: what ssh dials and the other hosts resolve
  int slots = 0;           // slots=N (0: not given; --nproc_per_node then decides)
  std::vector<int> slot_ids;  // the slots left by --include/--exclude; empty: all of them
  // The number of workers the slots give this host (0: not given).
  int nproc() const { return slot_ids.empty() ? slots : static_cast<int>(slot_ids.size()); }
  // Whether --include/--exclude picked some of the slots (they become CUDA_VISIBLE_DEVICES).
  bool some_slots() const { return !slot_ids.empty() && static_cast<int>(slot_ids.size()) != slots; }
};

// The hosts of a hostfile's text, in order. `path` names the file in errors. Throws UsageError
// naming the file, the line number and the fix on a malformed line (`slots=` not a positive
// number, an unknown key), a host given twice, or a file without hosts.
std::vector<FleetHost> parse_hostfile(const std::string& text, const std::string& path);

// The hosts of a Slurm-style list (common/hostlist.hpp), slots not given. Throws UsageError as
// expand_hostlist does, and on a host given twice.
std::vector<FleetHost> hosts_from_list(const std::string& list);

// `hosts` narrowed by --include (only these hosts, or these slots of a host) and then --exclude
// (not these hosts, or not these slots); "" leaves them as they are. Throws UsageError naming the
// spec and the fix for a host not in the list, a slot outside 0..slots-1 (or a slot of a host
// whose slots the hostfile does not give), or when no host is left.
std::vector<FleetHost> select_hosts(std::vector<FleetHost> hosts, const std::string& include,
                                    const std::string& exclude);

}  // namespace ddp::launcher
