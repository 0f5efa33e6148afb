// See cpu_budget.hpp.
#include "launcher/config/cpu_budget.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <fstream>
#include <vector>

#include <fmt/format.h>

#include "common/cgroup_mounts.hpp"

namespace ddp::launcher {
namespace {

// CPUs in this process's affinity mask, sized for hosts beyond CPU_SETSIZE.
int affinity_cpus(int online) {
  for (int size = std::max(online, 1024); size <= (1 << 20); size *= 2) {
    cpu_set_t* set = CPU_ALLOC(size);
    if (!set) break;
    const std::size_t bytes = CPU_ALLOC_SIZE(size);
    CPU_ZERO_S(bytes, set);
    const int rc = ::sched_getaffinity(0, bytes, set);
    const int count = rc == 0 ? CPU_COUNT_S(bytes, set) : 0;
    CPU_FREE(set);
    if (rc == 0) return std::max(count, 1);
    if (errno != EINVAL) break;  // EINVAL: the mask is larger than `size`
  }
  return online;
}

// The limit in CPUs a directory sets, if any: v2 "cpu.max" ("max 100000" or "QUOTA PERIOD"),
// v1 cpu.cfs_quota_us (-1: none) over cpu.cfs_period_us.
std::optional<double> limit_in(const std::string& dir, bool v2, std::string* file) {
  if (v2) {
    std::ifstream in(dir + "/cpu.max");
    std::string quota;
    double period = 0;
    if (!(in >> quota >> period) || quota == "max" || period <= 0) return std::nullopt;
    try {
      *file = dir + "/cpu.max";
      return std::stod(quota) / period;
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  std::ifstream q(dir + "/cpu.cfs_quota_us");
  std::ifstream p(dir + "/cpu.cfs_period_us");
  double quota = -1;
  double period = 0;
  if (!(q >> quota) || !(p >> period) || quota <= 0 || period <= 0) return std::nullopt;
  *file = dir + "/cpu.cfs_quota_us";
  return quota / period;
}

}  // namespace

int CpuBudget::usable() const {
  int n = affinity;
  if (quota) n = std::min(n, static_cast<int>(std::floor(*quota)));
  return std::max(n, 1);
}

std::string CpuBudget::describe() const {
  std::string out = fmt::format("{} of {} CPUs (affinity: {}", usable(), online, affinity);
  if (quota) out += fmt::format("; cgroup limit {:g} CPUs in {}", *quota, quota_file);
  return out + ")";
}

CpuBudget read_cpu_budget(const CpuBudgetSources& sources) {
  CpuBudget b;
  b.online = static_cast<int>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
  b.affinity = sources.read_affinity ? affinity_cpus(b.online) : b.online;
  for (const CgroupMount& m : cgroup_mounts(sources.mountinfo)) {
    if (!m.v2 && std::find(m.controllers.begin(), m.controllers.end(), "cpu") == m.controllers.end()) continue;
    std::string dir = own_cgroup_dir(m, sources.cgroup);
    // Every level from our own cgroup up to the mount point: a parent's limit caps its children.
    while (!dir.empty() && dir.size() >= m.mount_point.size()) {
      std::string file;
      if (const auto limit = limit_in(dir, m.v2, &file); limit && (!b.quota || *limit < *b.quota)) {
        b.quota = limit;
        b.quota_file = file;
      }
      if (dir == m.mount_point) break;
      dir = dir.substr(0, dir.rfind('/'));
    }
  }
  return b;
}

}  // namespace ddp::launcher
