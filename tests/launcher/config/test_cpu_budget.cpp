// read_cpu_budget() and the cgroup paths under it (common/cgroup_mounts.hpp), on fake trees: a
// mountinfo and a /proc/self/cgroup written into a temporary directory whose cgroup files carry
// the limits. Affinity is off in these (read_affinity = false: affinity = online CPUs), except in
// the last case, which reads this process's real mask.
#include "launcher/config/cpu_budget.hpp"

#include <catch2/catch.hpp>

#include <sched.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/cgroup_mounts.hpp"

namespace {

namespace fs = std::filesystem;
using ddp::launcher::CpuBudget;
using ddp::launcher::CpuBudgetSources;
using ddp::launcher::read_cpu_budget;

struct FakeTree {
  fs::path root;
  FakeTree() {
    char tmpl[] = "/tmp/ddp_cpu_budget_XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    root = tmpl;
  }
  ~FakeTree() { fs::remove_all(root); }
  // Writes `text` to root/<relative>, making its directories.
  std::string write(const std::string& relative, const std::string& text) const {
    const fs::path p = root / relative;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p.string();
  }
  std::string dir(const std::string& relative) const { return (root / relative).string(); }
  CpuBudgetSources sources() const {
    return CpuBudgetSources{(root / "mountinfo").string(), (root / "cgroup").string(), false};
  }
};

std::string v2_mount(const FakeTree& t, const std::string& mount_root = "/") {
  return "41 31 0:38 " + mount_root + " " + t.dir("unified") + " rw,relatime - cgroup2 cgroup2 rw\n";
}

std::string v1_cpu_mount(const FakeTree& t) {
  return "32 31 0:29 / " + t.dir("cpu") + " rw,relatime - cgroup cgroup rw,cpu,cpuacct\n" + "35 31 0:32 / " +
         t.dir("memory") + " rw,relatime - cgroup cgroup rw,memory\n";
}

}  // namespace

TEST_CASE("cgroup_mounts lists v2 and v1 mounts with their controllers", "[cpu_budget]") {
  FakeTree t;
  t.write("mountinfo", "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n" + v1_cpu_mount(t) + v2_mount(t));
  const auto mounts = ddp::cgroup_mounts(t.dir("mountinfo"));
  REQUIRE(mounts.size() == 3);
  CHECK_FALSE(mounts[0].v2);
  CHECK(mounts[0].controllers == std::vector<std::string>{"cpu", "cpuacct"});
  CHECK(mounts[1].controllers == std::vector<std::string>{"memory"});
  CHECK(mounts[2].v2);
  CHECK(mounts[2].mount_point == t.dir("unified"));
}

TEST_CASE("own_cgroup_dir joins the process's path to the mount, minus a container's root", "[cpu_budget]") {
  FakeTree t;
  t.write("cgroup", "4:memory:/a\n1:cpu,cpuacct:/job/x\n0::/kubepods/pod1/c1\n");
  t.write("mountinfo", v1_cpu_mount(t) + v2_mount(t, "/kubepods/pod1"));
  const auto mounts = ddp::cgroup_mounts(t.dir("mountinfo"));
  REQUIRE(mounts.size() == 3);
  CHECK(ddp::own_cgroup_dir(mounts[0], t.dir("cgroup")) == t.dir("cpu") + "/job/x");
  CHECK(ddp::own_cgroup_dir(mounts[1], t.dir("cgroup")) == t.dir("memory") + "/a");
  CHECK(ddp::own_cgroup_dir(mounts[2], t.dir("cgroup")) == t.dir("unified") + "/c1");
  t.write("cgroup", "0::/elsewhere\n");
  CHECK(ddp::own_cgroup_dir(mounts[2], t.dir("cgroup")).empty());  // outside the bind
}

TEST_CASE("cpu.max limits the budget, the tightest level wins, max means none", "[cpu_budget]") {
  FakeTree t;
  t.write("mountinfo", v2_mount(t));
  t.write("cgroup", "0::/job/step\n");
  t.write("unified/job/step/cpu.max", "max 100000\n");
  const int online = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  CHECK(read_cpu_budget(t.sources()).usable() == online);
  CHECK_FALSE(read_cpu_budget(t.sources()).quota);

  t.write("unified/job/cpu.max", "150000 100000\n");  // 1.5 CPUs on the parent
  CpuBudget b = read_cpu_budget(t.sources());
  REQUIRE(b.quota);
  CHECK(*b.quota == Approx(1.5));
  CHECK(b.quota_file == t.dir("unified") + "/job/cpu.max");
  CHECK(b.usable() == 1);  // rounded down
  CHECK(b.describe().find("cgroup limit 1.5 CPUs in " + b.quota_file) != std::string::npos);

  t.write("unified/job/step/cpu.max", "50000 100000\n");  // 0.5 on the child: still one worker
  b = read_cpu_budget(t.sources());
  CHECK(*b.quota == Approx(0.5));
  CHECK(b.usable() == 1);
}

TEST_CASE("cgroup v1 cpu.cfs_quota_us limits the budget, -1 means none", "[cpu_budget]") {
  FakeTree t;
  t.write("mountinfo", v1_cpu_mount(t));
  t.write("cgroup", "1:cpu,cpuacct:/job\n");
  t.write("cpu/job/cpu.cfs_quota_us", "-1\n");
  t.write("cpu/job/cpu.cfs_period_us", "100000\n");
  CHECK_FALSE(read_cpu_budget(t.sources()).quota);
  t.write("cpu/job/cpu.cfs_quota_us", "100000\n");
  const CpuBudget b = read_cpu_budget(t.sources());
  REQUIRE(b.quota);
  CHECK(*b.quota == Approx(1.0));
  CHECK(b.usable() == 1);
}

TEST_CASE("unreadable or malformed files mean no limit", "[cpu_budget]") {
  FakeTree t;
  t.write("mountinfo", v2_mount(t));
  t.write("cgroup", "0::/job\n");
  t.write("unified/job/cpu.max", "lots 100000\n");
  CHECK_FALSE(read_cpu_budget(t.sources()).quota);
  CHECK_FALSE(read_cpu_budget(CpuBudgetSources{"/nonexistent/mountinfo", "/nonexistent/cgroup", false}).quota);
}

TEST_CASE("the affinity mask counts", "[cpu_budget]") {
  cpu_set_t set;
  CPU_ZERO(&set);
  REQUIRE(::sched_getaffinity(0, sizeof(set), &set) == 0);
  CHECK(read_cpu_budget().affinity == CPU_COUNT(&set));
}
