// The pure parts of a launch over ssh: what environment goes to the hosts, the channel's header,
// and each host's ssh command line.
#include "launcher/fleet/control_channel.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <csignal>

#include "launcher/fleet/forwarded_env.hpp"
#include "launcher/fleet/host_command.hpp"
#include "tests/support/usage_error_of.hpp"

namespace {

using namespace ddp::launcher;
using ddp::Environment;
using ddp::testing::usage_error_of;

}  // namespace

TEST_CASE("the default prefixes, --export and the env file are forwarded, nothing else") {
  const Environment local{{"NCCL_DEBUG", "INFO"}, {"PATH", "/venv/bin:/usr/bin"}, {"PYTHONPATH", "/src"},
                          {"HOME", "/root"},       {"AWS_SECRET", "s"},          {"WANDB_KEY", "k"},
                          {"DDPLAUNCH_RDZV_TOKEN", "local-secret"},             {"VIRTUAL_ENV", "/venv"}};
  const Environment out =
      forwarded_environment(local, {"WANDB_KEY", "UNSET_NAME"}, "# comment\nFOO=bar=baz\n\nNCCL_DEBUG=WARN\n", "f");
  CHECK(out == Environment{{"FOO", "bar=baz"},  {"NCCL_DEBUG", "WARN"}, {"PATH", "/venv/bin:/usr/bin"},
                           {"PYTHONPATH", "/src"}, {"VIRTUAL_ENV", "/venv"}, {"WANDB_KEY", "k"}});
  CHECK(usage_error_of([&] { forwarded_environment(local, {}, "JUSTANAME\n", ".ddplaunch_env"); }) ==
        "--env_file .ddplaunch_env line 1: 'JUSTANAME' is not NAME=VALUE; write one NAME=VALUE a line");
}

TEST_CASE("the controller's header crosses a pipe whole, values with newlines too, and stops at end") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const ControllerHeader sent{"gpu2", "0123456789abcdef0123", {{"A", "line1\nline2\\x"}, {"B", ""}}};
  const std::string text = encode_controller_header(sent) + control_signal_line(SIGINT);
  REQUIRE(::write(fds[1], text.data(), text.size()) == static_cast<ssize_t>(text.size()));
  ::close(fds[1]);
  const ControllerHeader got = read_controller_header(fds[0]);
  CHECK(got.host == sent.host);
  CHECK(got.secret == sent.secret);
  CHECK(got.env == sent.env);
  char rest[32] = {};
  CHECK(::read(fds[0], rest, sizeof rest) == 11);  // the signal line is left for the watch
  CHECK(std::string(rest) == "signal INT\n");
  ::close(fds[0]);
}

TEST_CASE("a header that ends early or is not ours is refused") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const std::string text = "ddplaunch-fleet 1\nsecret x\n";
  REQUIRE(::write(fds[1], text.data(), text.size()) == static_cast<ssize_t>(text.size()));
  ::close(fds[1]);
  CHECK_THROWS_WITH(read_controller_header(fds[0]), Catch::Contains("the input ended before the controller's header"));
  ::close(fds[0]);
}

TEST_CASE("each host's command: same directory and launcher, the user's flags, the per-host ones not given") {
  FleetOptions f;
  f.ssh_port = 2222;
  f.ssh_options = {"User=me"};
  f.forward_args = {"--max_restarts=2", "train.py", "--name", "it's"};
  FleetPlan plan;
  plan.hosts = {FleetHost{"gpu1", 2, {}}, FleetHost{"gpu2", 4, {1, 3}}};
  plan.cwd = "/home/me/my run";
  plan.ddplaunch = "/opt/ddplaunch";
  plan.master_addr = "gpu1";
  plan.master_port = 29511;
  plan.run_id = "fleet-1";
  CHECK(host_ssh_argv(f, plan, 0) ==
        std::vector<std::string>{"ssh", "-p", "2222", "-o", "User=me", "-o", "BatchMode=yes", "gpu1",
                                 "cd -- '/home/me/my run' && exec /opt/ddplaunch --fleet_stdin --nnodes=2 --node_rank=0 "
                                 "--master_addr=gpu1 --master_port=29511 --rdzv_id=fleet-1 --nproc_per_node=2 "
                                 "--max_restarts=2 train.py --name 'it'\\''s'"});
  CHECK(host_command(f, plan, 1).find("&& export CUDA_VISIBLE_DEVICES=1,3 && exec /opt/ddplaunch --fleet_stdin "
                                      "--nnodes=2 --node_rank=1 ") != std::string::npos);
  f.given_flags = {"--nnodes", "--master_port", "--nproc_per_node"};
  CHECK(host_command(f, plan, 1).find("--fleet_stdin --node_rank=1 --master_addr=gpu1 --rdzv_id=fleet-1 "
                                      "--max_restarts=2") != std::string::npos);
}
