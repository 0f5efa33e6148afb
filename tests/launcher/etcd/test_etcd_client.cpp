// The etcd v3 client (launcher/etcd_client) against real etcd servers (Debian's etcd-server,
// started here on free loopback ports with a private data directory, and killed at the end):
// bytes through base64, create-if-absent and compare-and-swap transactions, prefixes, leases that
// expire and vanish with their keys, a watch that wakes on a change, authentication with the
// right and a wrong password, and a 3-member cluster that keeps answering with a member killed;
// without a server, the numbers read from etcd (parse_etcd_int) and the endpoints refused.
#include "launcher/etcd/etcd_client.hpp"

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ddplaunch/rendezvous/error.hpp"
#include "tests/support/etcd_cluster.hpp"

#include <catch2/catch.hpp>

using ddp::launcher::EtcdClient;
using ddp::launcher::EtcdClientOptions;
using ddp::launcher::EtcdError;
using ddp::testing::EtcdCluster;
using namespace std::chrono_literals;

TEST_CASE("etcd: a malformed number from etcd is an EtcdError naming it, never std::invalid_argument", "[etcd]") {
  using ddp::launcher::parse_etcd_int;
  CHECK(parse_etcd_int("field 'revision'", "42") == 42);
  CHECK(parse_etcd_int("key 'n'", "-7") == -7);
  CHECK(parse_etcd_int("key 'n'", "+5") == 5);
  CHECK(parse_etcd_int("field 'ID'", "9223372036854775807") == INT64_MAX);
  for (const char* bad : {"", "x", "12x", " 1", "1 ", "+", "-", "9223372036854775808", "1.5"}) {
    INFO("text: '" << bad << "'");
    CHECK_THROWS_MATCHES(
        parse_etcd_int("key 'n'", bad), EtcdError,
        Catch::Message("etcd key 'n' holds '" + std::string(bad) + "', not a decimal integer (int64)"));
  }
  // A long value is cut in the message.
  CHECK_THROWS_WITH(parse_etcd_int("key 'n'", std::string(100, 'a')),
                    Catch::Contains("'" + std::string(40, 'a') + "'") && !Catch::Contains(std::string(41, 'a')));
}

TEST_CASE("etcd: an endpoint that is not host:port is a UsageError naming it", "[etcd]") {
  for (const char* bad : {"127.0.0.1", "127.0.0.1:", ":2379", "127.0.0.1:x", "127.0.0.1:99999"}) {
    EtcdClientOptions o;
    o.endpoints = {bad};
    CHECK_THROWS_MATCHES(EtcdClient(o), ddp::UsageError,
                         Catch::Message("etcd endpoint '" + std::string(bad) +
                                        "' is not host:port (a name or address, IPv6 in brackets, port 0..65535); "
                                        "write it as 127.0.0.1:2379"));
  }
  EtcdClientOptions v6;
  v6.endpoints = {"[::1]:2379", "localhost:2379"};
  CHECK_NOTHROW(EtcdClient(v6));  // does not connect
}

TEST_CASE("etcd: bytes, transactions, prefixes and deletes", "[etcd]") {
  EtcdCluster etcd(1);
  EtcdClient c = etcd.client();
  const std::string bytes("v\0\xff\n", 4);
  CHECK(c.put("job/a", bytes) > 0);
  REQUIRE(c.get("job/a"));
  CHECK(c.get("job/a")->value == bytes);
  CHECK_FALSE(c.get("job/absent"));
  // create-if-absent: the first writer wins, the second learns the holder.
  CHECK(c.create("job/host", "node0"));
  std::optional<ddp::launcher::EtcdKeyValue> holder;
  CHECK_FALSE(c.create("job/host", "node1", 0, &holder));
  REQUIRE(holder);
  CHECK(holder->value == "node0");
  // compare-and-swap on the revision.
  const auto rev = c.get("job/host")->mod_revision;
  CHECK(c.compare_and_swap("job/host", rev, "node2"));
  CHECK_FALSE(c.compare_and_swap("job/host", rev, "node3"));
  CHECK(c.get("job/host")->value == "node2");
  CHECK(c.compare_and_swap("job/new", 0, "x"));  // 0: only if absent
  c.put("job/b", "2");
  c.put("jobz", "not in the prefix");
  std::int64_t at = 0;
  const auto listed = c.get_prefix("job/", &at);
  REQUIRE(listed.size() == 4);
  CHECK(listed[0].key == "job/a");
  CHECK(listed[1].key == "job/b");
  CHECK(at >= listed.back().mod_revision);
  CHECK(c.remove("job/a"));
  CHECK_FALSE(c.remove("job/a"));
}

TEST_CASE("etcd: a lease's keys vanish when it is not kept alive, a watch sees it", "[etcd]") {
  EtcdCluster etcd(1);
  EtcdClient c = etcd.client();
  const std::int64_t lease = c.grant_lease(2s);
  std::int64_t at = c.put("nodes/0", "alive", lease);
  CHECK(c.keep_alive(lease) >= 1);
  CHECK(c.get("nodes/0")->lease == lease);
  // Not kept alive: etcd deletes the key within the TTL (and a second); the watch wakes on it.
  const auto start = std::chrono::steady_clock::now();
  const auto events = c.watch("nodes/", true, at, 10s);
  REQUIRE(events.size() == 1);
  CHECK(events[0].deleted);
  CHECK(events[0].kv.key == "nodes/0");
  CHECK(std::chrono::steady_clock::now() - start < 5s);
  CHECK_FALSE(c.get("nodes/0"));
  CHECK(c.keep_alive(lease) == 0);  // expired
  c.revoke(lease);                  // not an error
}

TEST_CASE("etcd: a watch wakes on a put from another client, and times out quietly", "[etcd]") {
  EtcdCluster etcd(1);
  EtcdClient c = etcd.client();
  std::int64_t at = c.put("round/0/closed", "no");
  CHECK(c.watch("round/1/", true, at, 300ms).empty());
  auto watched = std::async(std::launch::async, [&] {
    EtcdClient w = etcd.client();
    return w.watch("round/0/closed", false, at, 20s);
  });
  // Not needed for the result (the watch starts at revision `at`, so a put before it begins is seen
  // too); it lets the watch be live when the put comes, the path a waiting node takes.
  std::this_thread::sleep_for(200ms);
  c.put("round/0/closed", "2");
  const auto events = watched.get();
  REQUIRE(events.size() == 1);
  CHECK_FALSE(events[0].deleted);
  CHECK(events[0].kv.value == "2");
}

TEST_CASE("etcd: a 3-member cluster keeps answering with one member killed", "[etcd]") {
  EtcdCluster etcd(3);
  EtcdClient c = etcd.client();
  c.put("k", "1");
  etcd.members[0]->send_signal(SIGKILL);
  REQUIRE(etcd.members[0]->wait_for(10s));
  // The client was using member 0 (the first endpoint): it moves on to the others.
  c.put("k", "2");
  CHECK(c.get("k")->value == "2");
  CHECK(c.create("only-once", "a"));
  CHECK_FALSE(c.create("only-once", "b"));
}

TEST_CASE("etcd: with authentication, the right password works and a wrong one is named", "[etcd]") {
  EtcdCluster etcd(1);
  {
    EtcdClient admin = etcd.client();
    admin.put("warm", "up");
  }
  // Auth is switched on with etcdctl (Debian's etcd-client, installed by scripts/setup.sh).
  const std::string endpoint = etcd.endpoints()[0];
  const auto run = [&](const std::string& args) {
    const std::string cmd = "ETCDCTL_API=3 etcdctl --endpoints=" + endpoint + " " + args + " >/dev/null 2>&1";
    return std::system(cmd.c_str());
  };
  REQUIRE(run("version") == 0);
  REQUIRE(run("user add root:secret-pw") == 0);
  REQUIRE(run("auth enable") == 0);
  EtcdClient right = etcd.client(10s, "root", "secret-pw");
  right.put("a", "1");
  CHECK(right.get("a")->value == "1");
  EtcdClient wrong = etcd.client(10s, "root", "nope");
  try {
    wrong.put("a", "2");
    FAIL("a wrong password was accepted");
  } catch (const ddp::UsageError& e) {
    CHECK_THAT(e.what(), Catch::Matchers::Contains("authentication as user=root failed"));
    CHECK_THAT(e.what(), !Catch::Matchers::Contains("nope"));
  }
  EtcdClient none = etcd.client(10s);
  try {
    none.put("a", "3");
    FAIL("a client without credentials was let in");
  } catch (const ddp::UsageError& e) {
    CHECK_THAT(e.what(), Catch::Matchers::Contains("requires authentication"));
  }
}
