// The hosts of a launch over ssh: DeepSpeed's hostfile, a Slurm host list, --include/--exclude.
#include "launcher/fleet/host_list.hpp"

#include <catch2/catch.hpp>

#include "tests/support/usage_error_of.hpp"

namespace {

using ddp::launcher::FleetHost;
using ddp::launcher::hosts_from_list;
using ddp::launcher::parse_hostfile;
using ddp::launcher::select_hosts;
using ddp::testing::usage_error_of;

std::vector<std::string> names(const std::vector<FleetHost>& hosts) {
  std::vector<std::string> out;
  for (const FleetHost& h : hosts) out.push_back(h.name + ":" + std::to_string(h.nproc()));
  return out;
}

const char* kFile = "# lab machines\n\ngpu1 slots=4\ngpu2 slots=2   # half\n  gpu3 slots=4\n";

}  // namespace

TEST_CASE("a DeepSpeed hostfile gives the hosts in order with their slots") {
  CHECK(names(parse_hostfile(kFile, "hosts")) == std::vector<std::string>{"gpu1:4", "gpu2:2", "gpu3:4"});
  CHECK(names(parse_hostfile("a\nb slots=1\n", "hosts")) == std::vector<std::string>{"a:0", "b:1"});
}

TEST_CASE("a malformed hostfile names the file, the line and the fix") {
  CHECK(usage_error_of([] { parse_hostfile("a slots=4\nb gpus=2\n", "hosts"); }) ==
        "--hostfile hosts line 2: 'gpus=2' is not understood; write `host slots=N`");
  CHECK(usage_error_of([] { parse_hostfile("a slots=0\n", "hosts"); }) ==
        "--hostfile hosts line 1: 'slots=0' is not a positive number of slots");
  CHECK(usage_error_of([] { parse_hostfile("a\na\n", "hosts"); }) ==
        "--hostfile hosts line 2: host a is given twice; give each host once");
  CHECK(usage_error_of([] { parse_hostfile("# none\n", "hosts"); }) ==
        "--hostfile hosts names no host; write one `host slots=N` line per host");
}

TEST_CASE("a Slurm host list (--hosts) gives its hosts") {
  CHECK(names(hosts_from_list("node[01-03],x")) == std::vector<std::string>{"node01:0", "node02:0", "node03:0", "x:0"});
  CHECK(usage_error_of([] { hosts_from_list("a,a"); }) == "--hosts a,a: host a is given twice; give each host once");
}

TEST_CASE("include and exclude specs take DeepSpeed's host[:slot,slot]@host") {
  const auto hosts = parse_hostfile(kFile, "hosts");
  // Included hosts keep the file's order: node 0 stays the file's first host among them.
  CHECK(names(select_hosts(hosts, "gpu3@gpu1", "")) == std::vector<std::string>{"gpu1:4", "gpu3:4"});
  CHECK(names(select_hosts(hosts, "gpu2:1", "")) == std::vector<std::string>{"gpu2:1"});
  CHECK(names(select_hosts(hosts, "", "gpu2")) == std::vector<std::string>{"gpu1:4", "gpu3:4"});
  const auto picked = select_hosts(hosts, "", "gpu1:0,2@gpu2:0,1");
  CHECK(names(picked) == std::vector<std::string>{"gpu1:2", "gpu3:4"});
  CHECK(picked[0].slot_ids == std::vector<int>{1, 3});
  CHECK(picked[0].some_slots());
  CHECK_FALSE(picked[1].some_slots());
}

TEST_CASE("a selection that names no such host or slot, or leaves none, is refused with the fix") {
  const auto hosts = parse_hostfile(kFile, "hosts");
  CHECK(usage_error_of([&] { select_hosts(hosts, "gpu9", ""); }) ==
        "--include=gpu9: host gpu9 is not in the host list; use a name from the hostfile or --hosts");
  CHECK(usage_error_of([&] { select_hosts(hosts, "gpu2:2", ""); }) == "--include=gpu2:2: host gpu2 has slots 0..1, not 2");
  CHECK(usage_error_of([&] { select_hosts(hosts_from_list("a,b"), "a:0", ""); }) ==
        "--include=a:0: host a has no slots= in the hostfile; give slots=N there to pick slots");
  CHECK(usage_error_of([&] { select_hosts(hosts, "gpu2", "gpu2"); }) ==
        "--include=gpu2 --exclude=gpu2 leave no host; keep at least one");
}
