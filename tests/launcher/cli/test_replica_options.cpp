// --replica_groups, --lighthouse, --lighthouse_port and the group's variable on the command line
// (launcher/cli/replica_options.hpp): each group's restart budget, the group index a layout's
// launcher gives, and the rules, each a UsageError naming the value and the fix.
#include <catch2/catch.hpp>

#include "launcher/config/launch_config.hpp"
#include "tests/support/command_line.hpp"
#include "tests/support/fake_env.hpp"

using namespace ddp::launcher;
using ddp::testing::FakeEnv;
using ddp::testing::parse;
using ddp::testing::usage_error;

TEST_CASE("without --replica_groups there is no layout, and a stray group variable changes nothing", "[replicas]") {
  const LaunchConfig c = parse({"prog"}, FakeEnv{{kReplicaGroupEnv, "1"}});
  CHECK(c.replicas.count == 0);
  CHECK(c.replicas.index == -1);
  CHECK_FALSE(c.replicas.supervises());
  CHECK(c.max_restarts == 0);
  CHECK(c.progress_from_collectives);
}

TEST_CASE("with --replica_groups: the layout's launcher, torchft's lighthouse and 10 restarts per group", "[replicas]") {
  const LaunchConfig c = parse({"--replica_groups", "2", "prog"});
  CHECK(c.replicas.count == 2);
  CHECK(c.replicas.supervises());
  CHECK(c.replicas.starts_lighthouse());
  CHECK(c.replicas.lighthouse == "torchft_lighthouse --min_replicas 1 --quorum_tick_ms 100 --join_timeout_ms 10000");
  CHECK(c.replicas.lighthouse_port == 29510);
  CHECK(c.max_restarts == 10);
  CHECK(parse({"--replica-groups=2", "--max_restarts=3", "prog"}).max_restarts == 3);
  CHECK(parse({"--replica_groups=2", "--max_restarts=0", "prog"}).max_restarts == 0);  // given, even 0
  const LaunchConfig other = parse({"--replica_groups=3", "--lighthouse", "none", "--lighthouse-port=29999", "prog"});
  CHECK_FALSE(other.replicas.starts_lighthouse());
  CHECK(other.replicas.lighthouse_port == 29999);
}

TEST_CASE("the group's variable makes a group's launcher", "[replicas]") {
  const LaunchConfig c = parse({"--replica_groups", "2", "prog"}, FakeEnv{{kReplicaGroupEnv, "1"}});
  CHECK(c.replicas.index == 1);
  CHECK_FALSE(c.replicas.supervises());
  CHECK(usage_error({"--replica_groups", "2", "prog"}, FakeEnv{{kReplicaGroupEnv, "2"}}) ==
        "DDPLAUNCH_REPLICA_GROUP=2 is not a group of --replica_groups=2; unset DDPLAUNCH_REPLICA_GROUP (the layout's "
        "launcher sets it)");
}

TEST_CASE("the layout's rules name the value and the fix", "[replicas]") {
  CHECK(usage_error({"--replica_groups", "300", "prog"}) ==
        "--replica_groups=300 is outside 1..256; give the number of replica groups (0: off)");
  CHECK(usage_error({"--replica_groups", "2", "--nnodes", "2", "--master_addr", "h", "--master_port", "29500",
                     "--node_rank", "0", "prog"}) ==
        "--replica_groups runs every group on this node, but --nnodes is 2; drop --nnodes (each group is one node, as "
        "in torchft's torchx recipe) or start one ddplaunch per group without --replica_groups");
  CHECK(usage_error({"--replica_groups", "2", "--master_port", "65535", "prog"}) ==
        "--master_port=65535 leaves no port for replica group 1 (port 65536); pick a port below 65535");
  CHECK(usage_error({"--replica_groups", "2", "--lighthouse_port", "0", "prog"}) ==
        "--lighthouse_port=0 is not a port; pick one in 1..65535 (default 29510)");
  CHECK(usage_error({"--replica_groups", "2", "--lighthouse", "torchft_lighthouse --min_replicas 1 --bind [::]:1",
                     "prog"}) ==
        "--lighthouse 'torchft_lighthouse --min_replicas 1 --bind [::]:1' has its own --bind; drop it and give the port "
        "as --lighthouse_port (ddplaunch binds the lighthouse and tells the groups where it is)");
  // With the lighthouse elsewhere, its command is not looked at.
  CHECK(parse({"--replica_groups", "2", "--lighthouse", "none", "--lighthouse_port", "0", "prog"}).replicas.count == 2);
}
