// TorchFT's layout as data (launcher/replicas/replica_layout.hpp): what each group's launcher
// makes of the shared command line, its environment, the lighthouse's command and address.
#include <catch2/catch.hpp>

#include "launcher/config/launch_config.hpp"
#include "launcher/replicas/replica_layout.hpp"

using namespace ddp::launcher;

namespace {
LaunchConfig layout(int index) {
  LaunchConfig c;
  c.replicas.count = 3;
  c.replicas.index = index;
  c.master_port = 29600;
  c.run_id = "job";
  return c;
}
}  // namespace

TEST_CASE("each group has its own store port, run id, logs and files", "[replicas]") {
  LaunchConfig c = layout(2);
  c.status_port = 8080;
  c.log_dir = "/logs";
  c.summary_json = "/out/summary.json";
  c.event_log = "events";
  c.progress_file = "/ckpt/step.txt";
  const LaunchConfig g = group_config(c);
  CHECK(g.master_port == 29602);  // torchft's torchx: --master_port=29600+i
  CHECK(g.status_port == 8082);
  CHECK(g.run_id == "job-replica2");
  CHECK(g.log_dir == "/logs/replica_2");
  CHECK(g.summary_json == "/out/summary.replica_2.json");
  CHECK(g.event_log == "events.replica_2");
  CHECK(g.progress_file == "/ckpt/step.replica_2.txt");
  CHECK(g.line_prefix_template == "[replica_2/${rank}]:");
  CHECK_FALSE(g.progress_from_collectives);  // torchft's process groups restart their sequence numbers
  CHECK(g.max_restarts == c.max_restarts);
}

TEST_CASE("what a group leaves as it is: a free port, no status port, no files, a chosen prefix", "[replicas]") {
  LaunchConfig c = layout(1);
  c.master_port = 0;
  c.line_prefix_template = "${rank}>";
  const LaunchConfig g = group_config(c);
  CHECK(g.master_port == 0);
  CHECK(g.status_port == -1);
  CHECK(g.log_dir.empty());
  CHECK(g.summary_json.empty());
  CHECK(g.progress_file.empty());
  CHECK(g.line_prefix_template == "${rank}>");
}

TEST_CASE("a group's file name: the group before the extension", "[replicas]") {
  CHECK(group_file("a/b.c/step", 0) == "a/b.c/step.replica_0");
  CHECK(group_file(".hidden", 1) == ".hidden.replica_1");
  CHECK(group_file("x.tar.gz", 1) == "x.tar.replica_1.gz");
  CHECK(group_file("", 1).empty());
}

TEST_CASE("a group's launcher is told torchft's variables and its group", "[replicas]") {
  ReplicaGroups r;
  r.count = 2;
  const ddp::Environment env =
      group_environment({{"PATH", "/bin"}, {"REPLICA_GROUP_ID", "7"}}, r, 1, "http://127.0.0.1:29510");
  CHECK(env == ddp::Environment{{"PATH", "/bin"},
                                {"DDPLAUNCH_REPLICA_GROUP", "1"},
                                {"REPLICA_GROUP_ID", "1"},
                                {"NUM_REPLICA_GROUPS", "2"},
                                {"TORCHFT_LIGHTHOUSE", "http://127.0.0.1:29510"}});
}

TEST_CASE("the dry run's account of the layout", "[replicas]") {
  LaunchConfig c = layout(-1);
  c.replicas.count = 2;
  c.max_restarts = 10;
  c.replicas.lighthouse = "torchft_lighthouse --min_replicas 1";
  CHECK(describe_layout(c, {}) ==
        "replica groups: 2, each its own launcher and restart domain (10 restarts each)\n"
        "lighthouse (supervised, ended with the job): torchft_lighthouse --min_replicas 1 --bind 127.0.0.1:29510\n"
        "group 0: store port 29600, run id job-replica0, REPLICA_GROUP_ID=0 NUM_REPLICA_GROUPS=2 "
        "TORCHFT_LIGHTHOUSE=http://127.0.0.1:29510\n"
        "group 1: store port 29601, run id job-replica1, REPLICA_GROUP_ID=1 NUM_REPLICA_GROUPS=2 "
        "TORCHFT_LIGHTHOUSE=http://127.0.0.1:29510\n");
  c.replicas.lighthouse = "none";
  c.master_port = 0;
  const std::string none = describe_layout(c, {{"TORCHFT_LIGHTHOUSE", "http://lh:1"}});
  CHECK(none.find("lighthouse: started elsewhere (--lighthouse none)\n") != std::string::npos);
  CHECK(none.find("group 1: store port free, run id job-replica1, REPLICA_GROUP_ID=1 NUM_REPLICA_GROUPS=2 "
                  "TORCHFT_LIGHTHOUSE=http://lh:1\n") != std::string::npos);
}

TEST_CASE("the lighthouse: its command with --bind, and where the groups find it", "[replicas]") {
  ReplicaGroups r;
  r.lighthouse = "  /opt/torchft_lighthouse\t--min_replicas 2  ";
  r.lighthouse_port = 29511;
  CHECK(lighthouse_argv(r) ==
        std::vector<std::string>{"/opt/torchft_lighthouse", "--min_replicas", "2", "--bind", "127.0.0.1:29511"});
  CHECK(lighthouse_url(r, {{"TORCHFT_LIGHTHOUSE", "http://elsewhere:1"}}) == "http://127.0.0.1:29511");
  r.lighthouse = "none";
  CHECK(lighthouse_url(r, {{"TORCHFT_LIGHTHOUSE", "http://elsewhere:1"}}) == "http://elsewhere:1");
  CHECK(lighthouse_url(r, {}) == "http://127.0.0.1:29511");
}
