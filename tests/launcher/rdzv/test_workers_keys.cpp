// delete_workers_keys() against a real TcpStoreServer on loopback: the launchers' keys (through
// their job views, with and without a job secret) stay, the workers' keys go (PyTorch's
// "/"-prefixed ones and c10d's un-prefixed "init/"), and a second call finds nothing left. And
// delete_stale_keys(): the job's keys of rounds before the first kept go too, so the built-in
// store backend's store stays the same size over the rounds (round_keys.hpp).
#include "launcher/rdzv/workers_keys.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ddplaunch/rendezvous/prefix_store.hpp"
#include "ddplaunch/rendezvous/tcp_store_client.hpp"
#include "ddplaunch/rendezvous/tcp_store_server.hpp"
#include "launcher/rdzv/job_secret.hpp"
#include "launcher/rdzv/job_store.hpp"
#include "launcher/rdzv/round_keys.hpp"
#include "launcher/rdzv/store_backend.hpp"

namespace {

namespace rdzv = ddp::rendezvous;
using namespace ddp::launcher;
using namespace std::chrono_literals;

// A started store on a free port of 127.0.0.1, with the store authentication of `secret`.
std::unique_ptr<rdzv::TcpStoreServer> serve(const std::string& secret) {
  rdzv::TcpStoreServerOptions o;
  o.host = "127.0.0.1";
  o.auth = store_auth(secret);
  o.log = [](std::string_view) {};
  auto server = std::make_unique<rdzv::TcpStoreServer>(o);
  server->start();
  return server;
}

// A client of `server`: a launcher's (proving `secret`) with the TCPStore's "/" prefix, or a
// worker's (no proof) with `key_prefix`.
std::shared_ptr<rdzv::TcpStoreClient> client(const rdzv::TcpStoreServer& server, const std::string& secret,
                                             const std::string& key_prefix = "/") {
  rdzv::TcpStoreClientOptions o;
  o.port = server.port();
  o.connect_timeout = 10s;
  o.timeout = 10s;
  o.key_prefix = key_prefix;
  if (!secret.empty()) o.auth = store_auth(secret);
  return std::make_shared<rdzv::TcpStoreClient>(o);
}

}  // namespace

TEST_CASE("a worker's key is any wire key outside /ddplaunch/", "[workers_keys]") {
  CHECK(is_workers_key("/default_pg/0//cpu//0"));
  CHECK(is_workers_key("init/"));
  CHECK(is_workers_key("/ddplaunch"));  // not under the namespace: a worker may name a key so
  CHECK_FALSE(is_workers_key("/ddplaunch/job/r0/ready"));
  CHECK_FALSE(is_workers_key("/ddplaunch/0123abcd/job/r1/outcome"));
}

TEST_CASE("the workers' keys go and the launchers' stay, with and without a job secret", "[workers_keys]") {
  const std::string secret = GENERATE(std::string(), std::string("0123456789abcdef-job-secret"));
  INFO("secret: '" << secret << "'");
  auto server = serve(secret);
  const JobStores launcher = job_stores(client(*server, secret), "job", secret);
  launcher.job->set("r0/ready", "ok");
  launcher.job->add("r0/joined", 1);
  launcher.root->compare_set("run_id", "", "job");
  // What torch's workers leave: gloo's address of a rank, a store barrier's counter, c10d's
  // un-prefixed init counter (a raw key), and the runtime's per-attempt keys.
  auto worker = client(*server, "");
  worker->set("default_pg/0//cpu//1", "address of rank 1");
  worker->add("store_based_barrier_key.1", 2);
  client(*server, "", "")->add("init/", 2);
  rdzv::PrefixStore("ddp/0", worker).set("gloo/rank/1", "x");

  auto raw = client(*server, secret, "");
  CHECK(delete_workers_keys(*raw) == 4);
  for (const std::string& key : raw->list_keys()) CHECK_FALSE(is_workers_key(key));
  CHECK(raw->list_keys().size() == 3);
  CHECK(launcher.job->get("r0/ready", 1s) == "ok");
  CHECK(launcher.job->add("r0/joined", 0) == 1);
  CHECK_FALSE(worker->check({"default_pg/0//cpu//1"}));
  CHECK(delete_workers_keys(*raw) == 0);
}

TEST_CASE("a connection without the job's proof deletes the workers' keys and sees no other", "[workers_keys]") {
  const std::string secret = "0123456789abcdef-job-secret";
  auto server = serve(secret);
  const JobStores launcher = job_stores(client(*server, secret), "job", secret);
  launcher.job->set("r1/cleared", "1");
  client(*server, "")->set("default_pg/0//cpu//0", "address of rank 0");
  auto stranger = client(*server, "", "");
  CHECK(delete_workers_keys(*stranger) == 1);
  CHECK(stranger->list_keys().empty());  // the launchers' keys are hidden from it, and stay
  CHECK(client(*server, secret, "")->list_keys().size() == 1);
  CHECK(launcher.job->get("r1/cleared", 1s) == "1");
}

TEST_CASE("a round key's round, and the first round kept", "[workers_keys]") {
  CHECK(round_of_key("r0/ready") == 0);
  CHECK(round_of_key("r12/node/1") == 12);
  CHECK_FALSE(round_of_key("ready"));
  CHECK_FALSE(round_of_key("run_id"));
  CHECK_FALSE(round_of_key("r/ready"));
  CHECK_FALSE(round_of_key("r1x/ready"));
  CHECK_FALSE(round_of_key("r-1/ready"));
  CHECK_FALSE(round_of_key("r3"));
  CHECK_FALSE(round_of_key("config/nnodes"));
  CHECK(parse_round("7") == 7);
  CHECK_FALSE(parse_round(""));
  CHECK_FALSE(parse_round("7 "));
  CHECK(first_round_kept(0) == 0);
  CHECK(first_round_kept(1) == 0);
  CHECK(first_round_kept(5) == 4);
}

TEST_CASE("the job's keys of rounds before the first kept go, the rest stay", "[workers_keys]") {
  const std::string secret = GENERATE(std::string(), std::string("0123456789abcdef-job-secret"));
  INFO("secret: '" << secret << "'");
  auto server = serve(secret);
  const JobStores launcher = job_stores(client(*server, secret), "job", secret);
  const JobStores other = job_stores(client(*server, secret), "job1", secret);  // a name "job" starts
  for (int r = 0; r < 12; ++r) launcher.job->set(round_prefix(r) + "ready", "ok");
  launcher.job->set("config/nnodes", "2");
  other.job->set("r0/ready", "ok");
  client(*server, "")->set("default_pg/0//cpu//1", "address of rank 1");

  auto raw = client(*server, secret, "");
  const DeletedKeys deleted = delete_stale_keys(*raw, StaleRounds{"/" + job_key_prefix("job", secret) + "/", 10});
  CHECK(deleted.workers == 1);
  CHECK(deleted.rounds == 10);
  CHECK_FALSE(launcher.job->check({"r9/ready"}));
  CHECK(launcher.job->get("r10/ready", 1s) == "ok");
  CHECK(launcher.job->get("r11/ready", 1s) == "ok");
  CHECK(launcher.job->get("config/nnodes", 1s) == "2");
  CHECK(other.job->get("r0/ready", 1s) == "ok");
}

TEST_CASE("the store backend keeps the job's store the same size however many rounds came before", "[workers_keys]") {
  const std::string secret = GENERATE(std::string(), std::string("0123456789abcdef-job-secret"));
  INFO("secret: '" << secret << "'");
  LaunchConfig c;
  c.min_nodes = c.max_nodes = 2;
  c.master_addr = "127.0.0.1";
  c.master_port = 0;
  c.run_id = "job";
  c.rdzv_secret = secret;
  EffectiveConfig eff;
  StoreBackend backend(c, eff, true);
  const std::shared_ptr<rdzv::Store> connection = backend.connector(std::nullopt)();  // proven: counts every key
  const JobStores launcher = job_stores(connection, "job", secret);
  std::vector<std::int64_t> sizes;
  for (int r = 0; r < 40; ++r) {
    // What two nodes' launchers and workers leave in a round that fails at once.
    if (r > 0) backend.clear_old_keys(first_round_kept(r));
    const std::string round = round_prefix(r);
    for (const char* key : {"node/0", "node/1", "ready", "cleared", "outcome", "hb/0", "hb/1", "failed/0"})
      launcher.job->set(round + key, "1");
    launcher.job->add(round + "joined", 2);
    connection->set("default_pg/0//cpu//" + std::to_string(r), "address of a rank");
    sizes.push_back(connection->num_keys());
  }
  CHECK(sizes[39] == sizes[9]);
  CHECK(launcher.job->check({"r38/ready", "r39/ready"}));
  CHECK_FALSE(launcher.job->check({"r37/ready"}));
}
