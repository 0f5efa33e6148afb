// EtcdStore, the launcher's Store over etcd (launcher/etcd_store), against a real etcd member:
// PyTorch's Store semantics (set/get, counters, compare-set on missing and present keys, check,
// wait with a timeout that leaves the store usable, delete), a wait woken by another client's
// write, interrupt() ending a wait parked for ever, counters that stay exact under racing
// clients (the compare-and-swap retries), keys confined to the prefix and held by the lease;
// and the job's lease shared by two launchers (etcd_job_lease), revoked to end the job's keys.
#include "launcher/etcd/etcd_store.hpp"

#include <future>
#include <thread>
#include <vector>

#include "ddplaunch/rendezvous/error.hpp"
#include "launcher/etcd/etcd_job_lease.hpp"
#include "tests/support/etcd_cluster.hpp"

#include <catch2/catch.hpp>

using ddp::launcher::EtcdJobLease;
using ddp::launcher::EtcdStore;
using ddp::launcher::EtcdStoreOptions;
using ddp::testing::EtcdCluster;
using namespace std::chrono_literals;

namespace {
EtcdStoreOptions store_options(const EtcdCluster& etcd, std::int64_t lease = 0) {
  EtcdStoreOptions o;
  o.client = etcd.options(10s);
  o.prefix = "/ddplaunch/test/";
  o.lease = lease;
  return o;
}
}  // namespace

TEST_CASE("etcd store: PyTorch's store semantics", "[etcd]") {
  EtcdCluster etcd(1);
  EtcdStore s(store_options(etcd));
  s.set("a", std::string("x\0y", 3));
  CHECK(s.get("a", 1s) == std::string("x\0y", 3));
  CHECK(s.add("n", 5) == 5);
  CHECK(s.add("n", -2) == 3);
  CHECK(s.add("n", 0) == 3);
  CHECK(s.add("fresh", 0) == 0);
  s.set("text", "not a number");
  CHECK_THROWS_MATCHES(s.add("text", 1), ddp::launcher::EtcdError,
                       Catch::Message("etcd key 'text' holds 'not a number', not a decimal integer (int64)"));
  CHECK(s.delete_key("text"));
  // compare_set: missing + expected "" sets; missing + expected "z" answers "z"; a mismatch
  // answers the current value; a match sets.
  CHECK(s.compare_set("c", "", "v1") == "v1");
  CHECK(s.compare_set("missing", "z", "v") == "z");
  CHECK_FALSE(s.check({"missing"}));
  CHECK(s.compare_set("c", "other", "v2") == "v1");
  CHECK(s.compare_set("c", "v1", "v2") == "v2");
  CHECK(s.check({"a", "c"}));
  CHECK_FALSE(s.check({"a", "nope"}));
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(s.wait({"a", "nope"}, 300ms), ddp::rendezvous::TimeoutError);
  CHECK(std::chrono::steady_clock::now() - start < 5s);
  CHECK_THROWS_AS(s.get("nope", 100ms), ddp::rendezvous::TimeoutError);
  s.set("x", "1");  // still usable after a timeout
  CHECK(s.delete_key("x"));
  CHECK_FALSE(s.delete_key("x"));
  CHECK(s.num_keys() == 3);  // a, n, c: add(k, 0) and a refused compare_set write nothing
  // Every key is under the prefix.
  for (const auto& kv : etcd.client().get_prefix("/")) CHECK(kv.key.rfind("/ddplaunch/test/", 0) == 0);
  CHECK(s.local_address() == "127.0.0.1");
}

TEST_CASE("etcd store: a wait wakes on another client's write, interrupt() ends one parked for ever", "[etcd]") {
  EtcdCluster etcd(1);
  EtcdStore waiter(store_options(etcd));
  EtcdStore writer(store_options(etcd));
  waiter.check({"warm"});  // connected
  auto woken = std::async(std::launch::async, [&] { return waiter.get("ready", 30s); });
  std::this_thread::sleep_for(300ms);  // the watch is parked (no event marks it)
  writer.set("ready", "ok");
  REQUIRE(woken.wait_for(10s) == std::future_status::ready);
  CHECK(woken.get() == "ok");

  EtcdStore parked(store_options(etcd));
  parked.check({"warm"});
  auto forever = std::async(std::launch::async, [&] { parked.wait({"never"}, std::chrono::milliseconds::max()); });
  std::this_thread::sleep_for(300ms);  // parked, as above
  const auto start = std::chrono::steady_clock::now();
  parked.interrupt();
  REQUIRE(forever.wait_for(5s) == std::future_status::ready);
  CHECK_THROWS_AS(forever.get(), ddp::rendezvous::ConnectionError);
  CHECK(std::chrono::steady_clock::now() - start < 2s);
}

TEST_CASE("etcd store: counters stay exact when clients race", "[etcd]") {
  EtcdCluster etcd(1);
  constexpr int kClients = 4, kAdds = 25;
  std::vector<std::future<void>> runs;
  for (int c = 0; c < kClients; ++c) {
    runs.push_back(std::async(std::launch::async, [&] {
      EtcdStore s(store_options(etcd));
      for (int i = 0; i < kAdds; ++i) s.add("joined", 1);
    }));
  }
  for (auto& r : runs) r.get();
  EtcdStore s(store_options(etcd));
  CHECK(s.add("joined", 0) == kClients * kAdds);
  // compare_set from an empty key: exactly one client wins.
  std::vector<std::future<std::string>> sets;
  for (int c = 0; c < kClients; ++c) {
    sets.push_back(std::async(std::launch::async, [&, c] {
      EtcdStore t(store_options(etcd));
      return t.compare_set("closed", "", std::to_string(c));
    }));
  }
  std::vector<std::string> answers;
  for (auto& f : sets) answers.push_back(f.get());
  for (const std::string& a : answers) CHECK(a == answers.front());
}

TEST_CASE("etcd store: the job's lease is shared, its keys vanish when it is revoked", "[etcd]") {
  EtcdCluster etcd(1);
  EtcdJobLease first(etcd.options(10s), "/ddplaunch/test/", 10s);
  EtcdJobLease second(etcd.options(10s), "/ddplaunch/test/", 10s);
  const std::int64_t id = first.id();
  CHECK(second.id() == id);  // adopted, not a lease of its own
  EtcdStore s(store_options(etcd, id));
  s.set("r0/closed", "2");
  CHECK(etcd.client().get("/ddplaunch/test/r0/closed")->lease == id);
  second.revoke();
  CHECK_FALSE(s.check({"r0/closed"}));
  CHECK_FALSE(etcd.client().get("/ddplaunch/test/lease"));
}
