// delete_workers_keys() against a real TcpStoreServer on loopback: the launchers' keys (through
// their job views, with and without a job secret) stay, the workers' keys go (PyTorch's
// "/"-prefixed ones and c10d's un-prefixed "init/"), and a second call finds nothing left.
#include "launcher/rdzv/workers_keys.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "ddplaunch/rendezvous/prefix_store.hpp"
#include "ddplaunch/rendezvous/tcp_store_client.hpp"
#include "ddplaunch/rendezvous/tcp_store_server.hpp"
#include "launcher/rdzv/job_secret.hpp"
#include "launcher/rdzv/job_store.hpp"

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
