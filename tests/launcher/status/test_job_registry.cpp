// The job registry (--dump_stacks without flags): where it lives, the directory checks, records
// written and read back, stale records (a dead pid, a reused pid), and which job is chosen.
#include "launcher/status/job_registry.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ddplaunch/common/env_lookup.hpp"

namespace {

namespace fs = std::filesystem;
using ddp::launcher::choose_job;
using ddp::launcher::JobRecord;
using ddp::launcher::JobRegistry;
using ddp::launcher::process_start_ticks;
using ddp::launcher::RegistryError;
using ddp::launcher::selecting_flags;

// A fresh private directory for one test, removed at the end.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "job_registry_XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ignored;  // best effort: a leftover directory in /tmp fails no test
    fs::permissions(path, fs::perms::owner_all, ignored);
    fs::remove_all(path, ignored);
  }
};

JobRecord record_of_this_process(const std::string& run_id, int port, long long started_ms) {
  JobRecord r;
  r.pid = static_cast<int>(::getpid());
  r.proc_start = process_start_ticks(r.pid).value();
  r.started_ms = started_ms;
  r.run_id = run_id;
  r.master_addr = "127.0.0.1";
  r.port = port;
  r.hosts_store = true;
  r.cwd = "/w";
  r.command = "sleep 30";
  return r;
}

// A pid that no process has now: a child that has exited and been reaped.
int dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return static_cast<int>(child);
}

TEST_CASE("job registry: XDG_RUNTIME_DIR when it is ours, else /tmp/ddplaunch-<uid>", "[job_registry]") {
  TempDir t;
  const std::string tmp = "/tmp/ddplaunch-" + std::to_string(::geteuid()) + "/jobs";
  CHECK(JobRegistry::for_user(ddp::map_env({{"XDG_RUNTIME_DIR", t.path.string()}})).dir() ==
        t.path.string() + "/ddplaunch/jobs");
  CHECK(JobRegistry::for_user(ddp::map_env({})).dir() == tmp);
  CHECK(JobRegistry::for_user(ddp::map_env({{"XDG_RUNTIME_DIR", ""}})).dir() == tmp);
  CHECK(JobRegistry::for_user(ddp::map_env({{"XDG_RUNTIME_DIR", "relative"}})).dir() == tmp);
  CHECK(JobRegistry::for_user(ddp::map_env({{"XDG_RUNTIME_DIR", (t.path / "missing").string()}})).dir() == tmp);
}

TEST_CASE("job registry: made 0700, written and read back, removed with its registration", "[job_registry]") {
  TempDir t;
  const JobRegistry registry((t.path / "ddplaunch" / "jobs").string());
  CHECK(registry.running().empty());  // no directory yet: no job, nothing made
  CHECK_FALSE(fs::exists(t.path / "ddplaunch"));
  registry.prepare();
  for (const fs::path& level : {t.path / "ddplaunch", t.path / "ddplaunch" / "jobs"}) {
    struct stat st {};
    REQUIRE(::lstat(level.c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0700);
  }
  const JobRecord mine = record_of_this_process("r1", 41233, 1000);
  const std::string path = registry.add(mine);
  CHECK(path == registry.dir() + "/" + std::to_string(mine.pid) + ".json");
  const auto live = registry.running();
  REQUIRE(live.size() == 1);
  CHECK(live[0].to_json() == mine.to_json());
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
}

TEST_CASE("job registry: a registration writes its record a second on, and removes it", "[job_registry]") {
  TempDir t;
  // The registration finds its directory as a launcher does: through XDG_RUNTIME_DIR.
  REQUIRE(::setenv("XDG_RUNTIME_DIR", t.path.c_str(), 1) == 0);
  const JobRegistry registry = JobRegistry::for_user(ddp::process_env());
  REQUIRE(registry.dir() == (t.path / "ddplaunch" / "jobs").string());
  boost::asio::io_context io;
  ddp::launcher::LaunchConfig config;
  config.program = "sleep";
  config.program_args = {"30"};
  ddp::launcher::EffectiveConfig effective;
  effective.port = 41233;
  {
    const auto registration = ddp::launcher::register_job(io, config, effective, 0, 1, true);
    REQUIRE(registration);
    CHECK(registry.running().empty());  // not yet
    const auto t0 = std::chrono::steady_clock::now();
    io.run();  // until the timer has fired and written the record
    CHECK(std::chrono::steady_clock::now() - t0 >= ddp::launcher::kRegisterAfter);
    const auto live = registry.running();
    REQUIRE(live.size() == 1);
    CHECK(live[0].port == 41233);
    CHECK(live[0].pid == static_cast<int>(::getpid()));
    CHECK(live[0].command == "sleep 30");
    CHECK(live[0].hosts_store);
  }
  CHECK(registry.running().empty());
  CHECK(fs::is_empty(registry.dir()));
  {
    // Ended within the second: nothing is ever written.
    boost::asio::io_context io2;
    const auto registration = ddp::launcher::register_job(io2, config, effective, 0, 1, true);
  }
  config.rdzv_rules.node0_hosts_store = false;  // etcd-v3: no store on node 0 to record
  CHECK_FALSE(ddp::launcher::register_job(io, config, effective, 0, 1, true));
  ::unsetenv("XDG_RUNTIME_DIR");
  CHECK(fs::is_empty(registry.dir()));
}

TEST_CASE("job registry: a directory others may write, or not a directory, is refused", "[job_registry]") {
  TempDir t;
  const JobRegistry registry((t.path / "ddplaunch" / "jobs").string());
  registry.prepare();
  SECTION("group-writable") {
    fs::permissions(t.path / "ddplaunch" / "jobs", fs::perms::owner_all | fs::perms::group_write);
    CHECK_THROWS_WITH(registry.prepare(), Catch::Contains("may be written by other users (mode 720)"));
    CHECK_THROWS_AS(registry.running(), RegistryError);
  }
  SECTION("world-writable parent") {
    fs::permissions(t.path / "ddplaunch", fs::perms::owner_all | fs::perms::others_write);
    CHECK_THROWS_WITH(registry.prepare(), Catch::Contains("may be written by other users (mode 702)"));
  }
  SECTION("a symlink to a directory") {
    fs::remove(t.path / "ddplaunch" / "jobs");
    fs::create_directory(t.path / "elsewhere");
    fs::create_directory_symlink(t.path / "elsewhere", t.path / "ddplaunch" / "jobs");
    CHECK_THROWS_WITH(registry.prepare(), Catch::Contains("is not a directory"));
  }
}

TEST_CASE("job registry: a directory another user owns is refused", "[job_registry]") {
  if (::geteuid() != 0) {
    WARN("not root: cannot give a directory to another user; skipped");
    return;
  }
  TempDir t;
  const JobRegistry registry((t.path / "ddplaunch" / "jobs").string());
  registry.prepare();
  REQUIRE(::chown((t.path / "ddplaunch" / "jobs").c_str(), 4242, 4242) == 0);
  CHECK_THROWS_WITH(registry.prepare(), Catch::Contains("belongs to uid 4242, not to this user (uid 0)"));
}

TEST_CASE("job registry: stale records are ignored and removed, other files left alone", "[job_registry]") {
  TempDir t;
  const JobRegistry registry((t.path / "jobs").string());
  fs::permissions(t.path, fs::perms::owner_all);
  registry.prepare();
  JobRecord dead = record_of_this_process("dead", 1, 1);
  dead.pid = dead_pid();
  const std::string dead_path = registry.add(dead);
  JobRecord reused = record_of_this_process("reused", 2, 2);
  reused.proc_start += 1;  // this pid, but another process's start time: the launcher's pid was reused
  const std::string reused_path = registry.add(reused);
  const fs::path other = t.path / "jobs" / "notes.json";
  std::ofstream(other) << "not a record\n";
  CHECK(registry.running().empty());
  CHECK_FALSE(fs::exists(dead_path));
  CHECK_FALSE(fs::exists(reused_path));
  CHECK(fs::exists(other));
}

TEST_CASE("job registry: process start times", "[job_registry]") {
  CHECK(process_start_ticks(static_cast<int>(::getpid())).has_value());
  CHECK(process_start_ticks(1).has_value());
  CHECK_FALSE(process_start_ticks(dead_pid()).has_value());
  CHECK_FALSE(process_start_ticks(0).has_value());
}

TEST_CASE("job record: JSON round trip, and what is not a record", "[job_registry]") {
  JobRecord r = record_of_this_process("it's", 29500, 123456789012);
  r.secret = true;
  r.nnodes = 2;
  r.node_rank = 1;
  const auto back = JobRecord::from_json(r.to_json());
  REQUIRE(back);
  CHECK(back->to_json() == r.to_json());
  CHECK(back->secret);
  CHECK(r.to_json().find("token") == std::string::npos);
  CHECK_FALSE(JobRecord::from_json(""));
  CHECK_FALSE(JobRecord::from_json("[1]"));
  CHECK_FALSE(JobRecord::from_json(R"({"pid": 1})"));
  CHECK_FALSE(JobRecord::from_json(R"({"pid": "x"})"));
  CHECK(ddp::launcher::short_command("p", {std::string(200, 'a')}).size() == ddp::launcher::kMaxCommandChars);
}

TEST_CASE("job registry: the only job, or the one started in the caller's directory, and a job's launchers count once",
          "[job_registry]") {
  CHECK_FALSE(choose_job({}, "/w").chosen);
  CHECK(choose_job({}, "/w").ambiguous.empty());
  JobRecord a = record_of_this_process("a", 41000, 100);
  JobRecord b = record_of_this_process("b", 42000, 300);
  JobRecord c = record_of_this_process("c", 43000, 200);
  a.cwd = "/exp/a";
  b.cwd = "/exp/b";
  // Job b's other launcher on this machine (node 1 of a two-node job), registered after node 0.
  JobRecord b1 = b;
  b1.pid += 1;
  b1.hosts_store = false;
  b1.node_rank = 1;
  b1.started_ms = 301;
  // The only job is asked from any directory.
  const auto only = choose_job({b1, b}, "/elsewhere");
  REQUIRE(only.chosen);
  CHECK(only.chosen->hosts_store);  // the store's host stands for its job
  CHECK(only.others.empty());
  // Several: the one started in the caller's directory.
  const auto choice = choose_job({a, b, c, b1}, "/exp/a");
  REQUIRE(choice.chosen);
  CHECK(choice.chosen->run_id == "a");
  CHECK(choice.ambiguous.empty());
  REQUIRE(choice.others.size() == 2);
  CHECK(choice.others[0].run_id == "b");  // newest first
  CHECK(choice.others[1].run_id == "c");
  // None started there: no guess, every job listed, newest first, each once.
  const auto none_here = choose_job({a, b, c, b1}, "/home/me");
  CHECK_FALSE(none_here.chosen);
  REQUIRE(none_here.ambiguous.size() == 3);
  CHECK(none_here.ambiguous[0].run_id == "b");
  CHECK(none_here.ambiguous[0].hosts_store);
  // Several started there: those listed, and only those.
  JobRecord c2 = c;
  c2.run_id = "c2";
  c2.port = 44000;
  c.cwd = c2.cwd = "/exp/c";
  const auto several_here = choose_job({a, c, c2}, "/exp/c");
  CHECK_FALSE(several_here.chosen);
  REQUIRE(several_here.ambiguous.size() == 2);
  CHECK(several_here.ambiguous[0].cwd == "/exp/c");
  CHECK(several_here.ambiguous[1].cwd == "/exp/c");
  // Same store, another run id: another job (--rdzv_id tells them apart).
  JobRecord a2 = a;
  a2.run_id = "a2";
  CHECK(choose_job({a, a2}, "/w").ambiguous.size() == 2);
}

TEST_CASE("job registry: every place a job of this user can register, each once", "[job_registry]") {
  TempDir t;
  const std::string fallback = "/tmp/ddplaunch-" + std::to_string(::geteuid()) + "/jobs";
  CHECK(JobRegistry::fallback().dir() == fallback);
  const auto dirs = [](const std::vector<JobRegistry>& registries) {
    std::vector<std::string> out;
    for (const JobRegistry& r : registries) out.push_back(r.dir());
    return out;
  };
  const auto with_xdg = dirs(JobRegistry::every_for_user(ddp::map_env({{"XDG_RUNTIME_DIR", t.path.string()}})));
  REQUIRE(with_xdg.size() >= 2);
  CHECK(with_xdg.front() == t.path.string() + "/ddplaunch/jobs");
  CHECK(with_xdg.back() == fallback);
  const auto without = dirs(JobRegistry::every_for_user(ddp::map_env({})));
  CHECK(without.back() == fallback);
  CHECK(std::count(without.begin(), without.end(), fallback) == 1);
}

TEST_CASE("job registry: the records of every place, each launcher once, a refused place said", "[job_registry]") {
  TempDir t;
  const JobRegistry one(t.path.string() + "/one/jobs");
  const JobRegistry two(t.path.string() + "/two/jobs");
  const JobRegistry bad(t.path.string() + "/bad/jobs");
  one.prepare();
  two.prepare();
  bad.prepare();
  ::chmod(bad.dir().c_str(), 0777);
  const JobRecord r = record_of_this_process("x", 41000, 1);
  one.add(r);
  two.add(r);  // a launcher registers in its registry and in the fallback
  std::vector<std::string> refused;
  const auto live = ddp::launcher::running_jobs({one, two, bad}, refused);
  CHECK(live.size() == 1);
  REQUIRE(refused.size() == 1);
  CHECK_THAT(refused[0], Catch::Contains(bad.dir()) && Catch::Contains("may be written by other users"));
  CHECK(ddp::launcher::describe_dirs({one, two, bad}) == one.dir() + ", " + two.dir() + " and " + bad.dir());
}

TEST_CASE("job registry: the flags that choose a job", "[job_registry]") {
  JobRecord r = record_of_this_process("3f2a", 41233, 1);
  CHECK(selecting_flags(r) == "--master_port 41233 --rdzv_id 3f2a");
  r.master_addr = "10.0.0.1";
  r.run_id = "my job";
  CHECK(selecting_flags(r) == "--master_addr 10.0.0.1 --master_port 41233 --rdzv_id 'my job'");
}

}  // namespace
