// --rdzv_backend among the backends the launcher has (rdzv_backend_choice.hpp): the launcher's
// own list gives the messages a user sees, and a made-up backend shows that a new one needs no
// change here: its names, refused names, rules, configure step and --master_port default come
// from its BackendKind, and validate() refuses what its rules refuse.
#include "launcher/cli/rdzv_backend_choice.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "launcher/backends.hpp"
#include "launcher/cli/validate.hpp"
#include "tests/support/fake_env.hpp"
#include "tests/support/usage_error_of.hpp"

namespace {

using ddp::launcher::apply_rdzv_backend;
using ddp::launcher::BackendKind;
using ddp::launcher::LaunchConfig;
using ddp::testing::lookup;
using ddp::testing::usage_error_of;

// What choosing `name` among `backends` throws ("<no exception>" when it does not).
std::string choice_error(const std::string& name, const std::vector<BackendKind>& backends) {
  LaunchConfig c;
  c.rdzv_backend = name;
  c.rdzv_endpoint = "h:2379";
  return usage_error_of([&] { apply_rdzv_backend(c, lookup({}), false, backends); });
}

// A backend that meets in a "queue" at --rdzv_endpoint, as etcd-v3 meets in etcd.
BackendKind queue_backend(int* configured) {
  BackendKind kind;
  kind.names = {"queue"};
  kind.refused_names = {"queue-v0"};
  kind.refused_why = "is gone; use --rdzv_backend queue";
  kind.rules.node0_hosts_store = false;
  kind.rules.meeting_place = "the queue";
  kind.rules.refuses_dump_stacks = true;
  kind.configure = [configured](LaunchConfig&, const ddp::EnvLookup&) { ++*configured; };
  return kind;
}

TEST_CASE("rdzv backend choice: the launcher's backends, their names and refused names", "[rdzv_backend_choice]") {
  const auto& all = ddp::launcher::rendezvous_backends();
  CHECK(choice_error("static", all) == "<no exception>");
  CHECK(choice_error("c10d", all) == "<no exception>");
  CHECK(choice_error("etcd-v3", all) == "<no exception>");
  CHECK(choice_error("zookeeper", all) == "--rdzv_backend=zookeeper is unknown; use static, c10d or etcd-v3");
  CHECK(choice_error("etcd-v2", all) ==
        "--rdzv_backend=etcd-v2 speaks etcd's v2 API, which etcd 3.6 removed; use --rdzv_backend etcd-v3 (etcd's "
        "v3 API, the same --rdzv_endpoint)");
  CHECK_THAT(choice_error("etcd", all), Catch::StartsWith("--rdzv_backend=etcd speaks etcd's v2 API"));
}

TEST_CASE("rdzv backend choice: the chosen backend's rules, configure step and port", "[rdzv_backend_choice]") {
  int configured = 0;
  std::vector<BackendKind> backends{ddp::launcher::rendezvous_backends().front(), queue_backend(&configured)};
  CHECK(choice_error("queue-v0", backends) == "--rdzv_backend=queue-v0 is gone; use --rdzv_backend queue");
  CHECK(choice_error("etcd-v3", backends) == "--rdzv_backend=etcd-v3 is unknown; use static, c10d or queue");
  CHECK(configured == 0);

  LaunchConfig c;
  c.rdzv_backend = "queue";
  c.master_port = 29500;
  apply_rdzv_backend(c, lookup({}), false, backends);
  CHECK(configured == 1);
  CHECK_FALSE(c.rdzv_rules.node0_hosts_store);
  CHECK(c.master_port == 0);  // its workers' store: a free port unless --master_port is given
  c.master_port = 29500;
  apply_rdzv_backend(c, lookup({}), true, backends);
  CHECK(c.master_port == 29500);

  LaunchConfig plain;
  apply_rdzv_backend(plain, lookup({}), false, backends);
  CHECK(plain.rdzv_rules.node0_hosts_store);
  CHECK(plain.master_port == 29500);
  CHECK(configured == 2);
}

TEST_CASE("rdzv backend choice: validate() refuses what the rules refuse, naming the backend",
          "[rdzv_backend_choice]") {
  int configured = 0;
  LaunchConfig c;
  c.program = "prog";
  c.rdzv_backend = "queue";
  apply_rdzv_backend(c, lookup({}), false, {queue_backend(&configured)});
  c.max_nodes = 2;
  CHECK(usage_error_of([&] { ddp::launcher::validate(c); }) == "<no exception>");  // port 0 with two nodes
  c.dump_stacks = true;
  c.program.clear();
  CHECK(usage_error_of([&] { ddp::launcher::validate(c); }) ==
        "--dump_stacks does not reach a job that meets in the queue yet; use py-spy dump --pid on its nodes");
}

}  // namespace
