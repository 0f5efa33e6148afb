// --hostfile / --hosts on the command line: what each host is handed (the user's arguments as
// typed, without the controller's own flags), which per-host flags the user gave, and the rules
// validate() keeps for them.
#include "launcher/cli/fleet_flags.hpp"

#include <catch2/catch.hpp>

#include "tests/support/command_line.hpp"

namespace {

using ddp::testing::Args;
using ddp::testing::parse;
using ddp::testing::usage_error;

}  // namespace

TEST_CASE("the hosts get the user's arguments as typed, without the controller's flags", "[cli]") {
  const auto c = parse({"--hostfile", "hosts", "--ssh_option=User=me", "--ssh_option", "Port=2200", "--max_restarts=2",
                        "--exclude", "gpu2", "--export=WANDB_KEY,HF_HOME", "--dry-run", "--master_port", "29511",
                        "--remote_ddplaunch", "/opt/ddplaunch", "train.py", "--hostfile", "x"});
  CHECK(c.fleet.active());
  CHECK(c.fleet.hostfile == "hosts");
  CHECK(c.fleet.ssh_options == Args{"User=me", "Port=2200"});
  CHECK(c.fleet.exports == Args{"WANDB_KEY", "HF_HOME"});
  CHECK(c.fleet.forward_args == Args{"--max_restarts=2", "--master_port", "29511", "train.py", "--hostfile", "x"});
  CHECK(c.fleet.given_flags == std::set<std::string>{"--master_port"});
  CHECK(c.dry_run);
}

TEST_CASE("the fleet flags' rules name the fix", "[cli]") {
  CHECK(usage_error({"--hostfile", "h", "--hosts", "a,b", "p"}) == "--hostfile and --hosts both name the hosts; use one of them");
  CHECK(usage_error({"--include", "a", "p"}) ==
        "--include, --exclude, --ssh_port, --ssh_option, --export, --env_file and --remote_ddplaunch go with --hostfile "
        "or --hosts; add one of those");
  CHECK(usage_error({"--hosts", "a,b", "--node_rank=1", "p"}) ==
        "--node_rank is set for each host by --hostfile/--hosts (node 0 on the first host); remove it");
  CHECK(usage_error({"--fleet_probe=x"}) == "--fleet_probe is ddplaunch's own preflight over ssh; it takes listen or connect");
  CHECK_FALSE(parse({"--fleet_probe=listen", "--master_port=0"}).fleet.active());
}
