// Where this process's cgroups are: the cgroup mounts of /proc/self/mountinfo (v2, and v1
// hierarchies with their controllers, as on hybrid systems) and this process's path in each
// (/proc/self/cgroup). Used by the job's cgroup (job_cgroup.hpp) and the CPU budget of
// --nproc_per_node=cpu (launcher/config/cpu_budget.hpp). The file paths are parameters, so tests
// read fake trees. Pure reads: never throw; a missing or unreadable file reads as no mounts.
#pragma once

#include <string>
#include <vector>

namespace ddp {

struct CgroupMount {
  std::string root;                      // the mount's root inside the hierarchy ("/" unless a container's bind)
  std::string mount_point;               // where it is mounted, e.g. /sys/fs/cgroup or /sys/fs/cgroup/cpu
  bool v2 = false;                       // cgroup2 (unified) rather than a v1 hierarchy
  std::vector<std::string> controllers;  // v1: the super options that name controllers (cpu, cpuacct, ...)
};

// The cgroup mounts listed in `mountinfo` (format of /proc/self/mountinfo), in file order.
std::vector<CgroupMount> cgroup_mounts(const std::string& mountinfo = "/proc/self/mountinfo");

// The directory of this process's cgroup in `mount`: its path in the hierarchy, from `cgroup`
// (format of /proc/self/cgroup: "0::/path" for v2, "N:cpu,cpuacct:/path" for v1), made relative
// to the mount's root and joined to the mount point. "" when the file has no line for the mount
// or the path lies outside what is mounted.
std::string own_cgroup_dir(const CgroupMount& mount, const std::string& cgroup = "/proc/self/cgroup");

// The cgroup v2 mount point: /sys/fs/cgroup or /sys/fs/cgroup/unified when one is cgroup2, else the
// first cgroup2 mount of /proc/self/mountinfo; "" if none.
std::string cgroup2_mount_point();
// This process's cgroup v2 path ("/..." relative to the mount point) from /proc/self/cgroup,
// "" if none.
std::string own_cgroup2_path();

}  // namespace ddp
