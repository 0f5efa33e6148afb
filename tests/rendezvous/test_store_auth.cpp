// Authenticated store connections (store_auth.hpp): the handshake and the access rules in
// StoreState, byte for byte, then a real server and client on loopback: a proven client reaches
// the protected keys, a client with another secret or none cannot list, read, wait on, write or
// delete them, and a client with a secret refuses a store that checks none. Also: allow_only
// closes connections already open from addresses that are not admitted, and a store filled by
// strangers still proves and serves launchers, and keeps room for the round's workers.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <condition_variable>
#include <mutex>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "ddplaunch/rendezvous/error.hpp"
#include "ddplaunch/rendezvous/store_auth.hpp"
#include "ddplaunch/rendezvous/tcp_store_client.hpp"
#include "ddplaunch/rendezvous/tcp_store_server.hpp"
#include "rendezvous/protocol.hpp"
#include "rendezvous/request.hpp"
#include "rendezvous/store_state.hpp"
#include "tests/rendezvous/make_request.hpp"

namespace {

namespace rdzv = ddp::rendezvous;
using ddp::testing::make_request;
using rdzv::ClientId;
using rdzv::Outgoing;
using rdzv::QueryType;
using namespace std::chrono_literals;

rdzv::StoreAuth test_auth(const std::string& secret) {
  rdzv::StoreAuth auth;
  auth.protected_prefix = "/ddplaunch/";
  auth.prove = [secret](std::string_view challenge) { return secret + ":" + std::string(challenge); };
  return auth;
}

// The string in a reply (u64 length + bytes).
std::string as_str(const std::string& bytes) {
  REQUIRE(bytes.size() >= 8);
  REQUIRE(static_cast<std::size_t>(rdzv::get_i64(bytes.data())) == bytes.size() - 8);
  return bytes.substr(8);
}

struct State {
  explicit State(rdzv::StoreAuth auth) : state(std::move(auth)) {}

  void join(ClientId id) {
    state.connect(id);
    std::vector<Outgoing> out;
    state.handle(id, make_request(QueryType::Validate, {}, {}, rdzv::kValidationMagic), out);
  }
  std::string call(ClientId id, rdzv::Request r) {
    std::vector<Outgoing> out;
    state.handle(id, std::move(r), out);
    std::string bytes;
    for (const auto& o : out) {
      if (o.client == id) bytes += o.bytes;
    }
    return bytes;
  }
  std::string challenge(ClientId id) {
    return as_str(call(id, make_request(QueryType::Get, {std::string(rdzv::kAuthChallengeKey)})));
  }
  std::string prove(ClientId id, const std::string& challenge, const std::string& proof) {
    return as_str(
        call(id, make_request(QueryType::CompareSet, {std::string(rdzv::kAuthProofKey)}, {challenge, proof})));
  }

  rdzv::StoreState state;
};

}  // namespace

TEST_CASE("the auth handshake proves a connection with a fresh challenge, once", "[store_auth]") {
  State s(test_auth("s3cret"));
  s.join(1);
  const std::string c1 = s.challenge(1);
  CHECK(c1.size() == 32);
  CHECK(s.challenge(1) != c1);  // a new challenge replaces the old one
  const std::string c2 = s.challenge(1);
  CHECK(s.prove(1, c2, "other:" + c2) == rdzv::kAuthDenied);
  CHECK(s.prove(1, c2, "s3cret:" + c2) == rdzv::kAuthDenied);  // used up by the wrong proof
  const std::string c3 = s.challenge(1);
  CHECK(s.prove(1, c1, "s3cret:" + c1) == rdzv::kAuthDenied);  // not the challenge issued last
  CHECK(s.prove(1, c3, "s3cret:" + c3) == rdzv::kAuthDenied);  // used up by the stale proof
  const std::string c4 = s.challenge(1);
  CHECK(s.prove(1, c4, "s3cret:" + c4) == rdzv::kAuthAccepted);
  // Neither handshake key is stored.
  CHECK(s.state.num_keys() == 0);
}

TEST_CASE("an unproven connection cannot touch protected keys, other keys stay open", "[store_auth]") {
  State s(test_auth("s3cret"));
  s.join(1);
  const std::string c = s.challenge(1);
  REQUIRE(s.prove(1, c, "s3cret:" + c) == rdzv::kAuthAccepted);
  s.call(1, make_request(QueryType::Set, {"/ddplaunch/x/r0/outcome"}, {"ok"}));
  s.join(2);
  s.call(2, make_request(QueryType::Set, {"/worker/k"}, {"v"}));
  CHECK(as_str(s.call(2, make_request(QueryType::Get, {"/worker/k"}))) == "v");
  // LIST_KEYS hides the launchers' keys from the stranger, not from the launcher.
  const std::string stranger_list = s.call(2, make_request(QueryType::ListKeys));
  CHECK(rdzv::get_i64(stranger_list.data()) == 1);
  CHECK(stranger_list.find("ddplaunch") == std::string::npos);
  CHECK(rdzv::get_i64(s.call(1, make_request(QueryType::ListKeys)).data()) == 2);
  const std::vector<rdzv::Request> attacks = {
      make_request(QueryType::Set, {"/ddplaunch/x/r0/outcome"}, {"forged"}),
      make_request(QueryType::Get, {"/ddplaunch/x/r0/outcome"}),
      make_request(QueryType::DeleteKey, {"/ddplaunch/x/r0/outcome"}),
      make_request(QueryType::Wait, {"/worker/k", "/ddplaunch/x/r0/hb/1"}),
      make_request(QueryType::Check, {"/ddplaunch/x/r0/hb/1"}),
      make_request(QueryType::Add, {"/ddplaunch/x/n"}, {}, 1),
      make_request(QueryType::Append, {"/ddplaunch/x/r0/outcome"}, {"x"}),
      make_request(QueryType::CompareSet, {"/ddplaunch/x/r0/outcome"}, {"ok", "forged"}),
      make_request(QueryType::MultiSet, {"/worker/a", "/ddplaunch/x/a"}, {"1", "2"}),
      make_request(QueryType::MultiGet, {"/ddplaunch/x/r0/outcome"}),
      make_request(QueryType::QueuePush, {"/ddplaunch/x/q"}, {"v"}),
      make_request(QueryType::Barrier, {"/ddplaunch/x/b"}, {}, 2),
  };
  ClientId id = 10;
  for (const auto& attack : attacks) {
    CAPTURE(rdzv::query_name(attack.type));
    s.join(id);
    std::vector<Outgoing> out;
    CHECK_THROWS_AS(s.state.handle(id, attack, out), rdzv::ProtocolError);
    CHECK(out.empty());
    s.state.disconnect(id++);
  }
  // A denied proof does not open them either.
  s.join(3);
  const std::string c3 = s.challenge(3);
  REQUIRE(s.prove(3, c3, "guess") == rdzv::kAuthDenied);
  std::vector<Outgoing> out;
  CHECK_THROWS_AS(s.state.handle(3, make_request(QueryType::Get, {"/ddplaunch/x/r0/outcome"}), out),
                  rdzv::ProtocolError);
  CHECK(as_str(s.call(1, make_request(QueryType::Get, {"/ddplaunch/x/r0/outcome"}))) == "ok");
  CHECK(s.state.num_keys() == 2);
}

TEST_CASE("the handshake of an unproven connection is free of the budget, a few challenges at most",
          "[store_auth][budget]") {
  State s(test_auth("s3cret"));
  s.join(1);
  const rdzv::Request challenge = make_request(QueryType::Get, {std::string(rdzv::kAuthChallengeKey)});
  const rdzv::Request proof = make_request(QueryType::CompareSet, {std::string(rdzv::kAuthProofKey)}, {"c", "p"});
  CHECK_FALSE(s.state.handshake(1, proof));  // no challenge to answer yet
  for (int i = 0; i < rdzv::StoreState::kMaxFreeChallenges; ++i) {
    CHECK(s.state.handshake(1, challenge));
    s.challenge(1);
  }
  CHECK(s.state.handshake(1, proof));  // the last challenge may still be answered
  CHECK_FALSE(s.state.handshake(1, challenge));
  CHECK_FALSE(s.state.handshake(1, make_request(QueryType::Get, {"/worker/k"})));
  CHECK_FALSE(s.state.handshake(1, make_request(QueryType::CompareSet, {"/worker/k"}, {"", "v"})));
  // The handshake keys cost nothing in cost() either way: the server just does not ask.
  s.join(2);
  const std::string c = s.challenge(2);
  REQUIRE(s.prove(2, c, "s3cret:" + c) == rdzv::kAuthAccepted);
  CHECK_FALSE(s.state.handshake(2, challenge));  // proven: exempt from the budget as a whole
  State plain(rdzv::StoreAuth{});
  plain.join(1);
  CHECK_FALSE(plain.state.handshake(1, challenge));  // a plain key of a plain store
}

TEST_CASE("GETNUMKEYS counts for an unproven connection only the keys it may see", "[store_auth]") {
  State s(test_auth("s3cret"));
  s.join(1);
  const std::string c = s.challenge(1);
  REQUIRE(s.prove(1, c, "s3cret:" + c) == rdzv::kAuthAccepted);
  for (const char* key : {"/ddplaunch/x/r0/node/0", "/ddplaunch/x/r0/node/1", "/ddplaunch/x/r0/hb/0"}) {
    s.call(1, make_request(QueryType::Set, {key}, {"v"}));
  }
  s.join(2);
  s.call(2, make_request(QueryType::Set, {"/worker/k"}, {"v"}));
  CHECK(rdzv::get_i64(s.call(2, make_request(QueryType::GetNumKeys)).data()) == 1);
  CHECK(rdzv::get_i64(s.call(1, make_request(QueryType::GetNumKeys)).data()) == 4);
  State plain(rdzv::StoreAuth{});
  plain.join(1);
  plain.call(1, make_request(QueryType::Set, {"/ddplaunch/x"}, {"v"}));
  CHECK(rdzv::get_i64(plain.call(1, make_request(QueryType::GetNumKeys)).data()) == 1);
}

TEST_CASE("without auth the handshake keys are plain keys", "[store_auth]") {
  State s(rdzv::StoreAuth{});
  s.join(1);
  CHECK(s.challenge(1).empty());  // a client with a secret reports a store that checks none
  CHECK(as_str(s.call(1, make_request(QueryType::Get, {"/ddplaunch/x"}))).empty());
}

namespace {
rdzv::TcpStoreClientOptions client_options(std::uint16_t port, const std::string& secret) {
  rdzv::TcpStoreClientOptions o;
  o.port = port;
  o.connect_timeout = 5s;
  o.timeout = 5s;
  if (!secret.empty()) o.auth.prove = test_auth(secret).prove;
  return o;
}
}  // namespace

TEST_CASE("over TCP: a proven launcher reaches its keys, a stranger is closed", "[store_auth][loopback]") {
  rdzv::TcpStoreServerOptions so;
  so.host = "127.0.0.1";
  so.auth = test_auth("s3cret");
  so.report_interval = 0ms;
  so.log = [](std::string_view) {};
  rdzv::TcpStoreServer server(so);
  server.start();
  rdzv::TcpStoreClient launcher(client_options(server.port(), "s3cret"));
  launcher.set("ddplaunch/x/r0/outcome", "ok");
  CHECK(launcher.get("ddplaunch/x/r0/outcome", 1s) == "ok");

  rdzv::TcpStoreClient worker(client_options(server.port(), ""));
  worker.set("worker/k", "v");
  CHECK(worker.get("worker/k", 1s) == "v");
  CHECK(worker.list_keys() == std::vector<std::string>{"worker/k"});
  CHECK_THROWS_AS(worker.delete_key("ddplaunch/x/r0/outcome"), rdzv::ConnectionError);
  CHECK(launcher.get("ddplaunch/x/r0/outcome", 1s) == "ok");

  CHECK_THROWS_WITH(rdzv::TcpStoreClient(client_options(server.port(), "other")),
                    Catch::Contains("refused this launcher's job secret"));
  // A launcher without a secret asks, and says why instead of being closed at its first key.
  rdzv::TcpStoreClientOptions no_secret = client_options(server.port(), "");
  no_secret.auth.expect_none = true;
  CHECK_THROWS_WITH(rdzv::TcpStoreClient(no_secret), Catch::Contains("serves launchers with a job secret only"));
  server.stop();
}

TEST_CASE("over TCP: a client with a secret refuses a store that checks none", "[store_auth][loopback]") {
  rdzv::TcpStoreServerOptions so;
  so.host = "127.0.0.1";
  so.log = [](std::string_view) {};
  rdzv::TcpStoreServer server(so);
  server.start();
  CHECK_THROWS_AS(rdzv::TcpStoreClient(client_options(server.port(), "s3cret")), rdzv::AuthError);
  rdzv::TcpStoreClientOptions no_secret = client_options(server.port(), "");
  no_secret.auth.expect_none = true;
  rdzv::TcpStoreClient plain(no_secret);
  plain.set("k", "v");
  CHECK(plain.get("k", 1s) == "v");
  server.stop();
}

namespace {
// A non-loopback IPv4 address of this host, or "" when it has none.
std::string own_address() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return "";
  std::string found;
  for (ifaddrs* a = list; a && found.empty(); a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET || (a->ifa_flags & IFF_LOOPBACK)) continue;
    char text[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof text);
    found = text;
  }
  ::freeifaddrs(list);
  return found;
}
}  // namespace

TEST_CASE("allow_only closes connections already open from other addresses", "[store_auth][loopback]") {
  const std::string own = own_address();
  if (own.empty()) {
    WARN("this host has no non-loopback IPv4 address: nothing to test");
    return;
  }
  rdzv::TcpStoreServerOptions so;  // every interface
  so.report_interval = 0ms;
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<std::string> lines;
  so.log = [&](std::string_view line) {
    std::lock_guard<std::mutex> lock(mutex);
    lines.emplace_back(line);
    cv.notify_all();
  };
  rdzv::TcpStoreServer server(so);
  server.start();
  // Connected to the host's own address, the peer address is that address, not loopback: it
  // stands for a stranger who connected before the round formed.
  rdzv::TcpStoreClientOptions stranger_options = client_options(server.port(), "");
  stranger_options.host = own;
  rdzv::TcpStoreClient stranger(stranger_options);
  stranger.set("k", "v");
  rdzv::TcpStoreClient node(client_options(server.port(), ""));
  server.allow_only({"192.0.2.250"});
  {
    std::unique_lock<std::mutex> lock(mutex);
    REQUIRE(cv.wait_for(lock, 5s, [&] {
      return std::any_of(lines.begin(), lines.end(),
                         [](const auto& l) { return l.find("not an address of the job's nodes") != l.npos; });
    }));
  }
  CHECK_THROWS_AS(stranger.get("k", 1s), rdzv::ConnectionError);
  CHECK(node.get("k", 1s) == "v");  // loopback stays
  // And a new connection from there is refused at once, saying why (no retries until the deadline).
  stranger_options.connect_timeout = 30s;
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(
      rdzv::TcpStoreClient(stranger_options),
      Catch::Contains("refuses connections from this host (" + own + "): the job's round formed without it"));
  CHECK(std::chrono::steady_clock::now() - start < 10s);
  // Without a secret the message names the risk of having none; with one it does not blame its
  // absence, and the error carries the store and this host for callers' own words (--dump_stacks).
  try {
    rdzv::TcpStoreClient refused(stranger_options);
    FAIL("served");
  } catch (const rdzv::RefusedError& e) {
    CHECK_THAT(e.what(), Catch::Contains("a job without a secret lets any host take it"));
  }
  rdzv::TcpStoreClientOptions with_secret = client_options(server.port(), "s3cret");
  with_secret.host = own;
  try {
    rdzv::TcpStoreClient refused(with_secret);
    FAIL("served");
  } catch (const rdzv::RefusedError& e) {
    CHECK_THAT(e.what(), !Catch::Contains("without a secret") && Catch::Contains("or this host's address changed"));
    CHECK(e.host() == own);
    CHECK(e.store() == own + ":" + std::to_string(server.port()));
  }
  server.stop();
}

namespace {
// Stores values under fresh keys as issue 41's stranger did: each refusal closes the connection, so
// a new one follows with half the size, down to 1 byte. Returns the bytes of the values stored.
std::size_t fill(std::uint16_t port, std::size_t size) {
  std::size_t stored = 0;
  int n = 0;
  auto client = std::make_unique<rdzv::TcpStoreClient>(client_options(port, ""));
  while (size > 0) {
    try {
      client->set("fill/" + std::to_string(n++), std::string(size, 'x'));
      client->num_keys();  // a SET has no reply: this one sees a refusal
      stored += size;
    } catch (const rdzv::ConnectionError&) {
      size /= 2;
      client = std::make_unique<rdzv::TcpStoreClient>(client_options(port, ""));
    }
  }
  return stored;
}

rdzv::TcpStoreServerOptions small_store() {
  rdzv::TcpStoreServerOptions so;
  so.host = "127.0.0.1";
  so.auth = test_auth("s3cret");
  so.memory_budget = std::size_t{8} << 20;  // stored data may take 3/4 of it, strangers 1/16
  so.report_interval = 0ms;
  so.log = [](std::string_view) {};
  return so;
}
}  // namespace

TEST_CASE("a launcher proves the secret and is served in a store full to the last byte",
          "[store_auth][budget][loopback]") {
  rdzv::TcpStoreServer server(small_store());
  server.trust_round({"127.0.0.1"});  // a round formed: loopback may fill the whole share
  server.start();
  const std::size_t stored = fill(server.port(), std::size_t{1} << 20);
  CHECK(stored > (std::size_t{6} << 20) - (std::size_t{64} << 10));
  rdzv::TcpStoreClient launcher(client_options(server.port(), "s3cret"));  // the proof is answered
  const std::string mib(std::size_t{1} << 20, 'x');
  launcher.set("ddplaunch/x/r0/node/1", mib);
  CHECK(launcher.get("ddplaunch/x/r0/node/1", 1s) == mib);
  server.stop();
}

TEST_CASE("strangers fill at most 1/16 of the budget and the round's hosts keep the rest",
          "[store_auth][budget][loopback]") {
  rdzv::TcpStoreServer server(small_store());
  server.start();
  // Before any round every unproven connection is a stranger, loopback too.
  CHECK(fill(server.port(), std::size_t{1} << 20) <= std::size_t{512} << 10);
  CHECK(server.memory_used() <= std::size_t{512} << 10);
  // A round formed on 192.0.2.1 (and this host): its workers, here on loopback, store the rest.
  server.trust_round({"192.0.2.1"});
  rdzv::TcpStoreClient worker(client_options(server.port(), ""));
  const std::string mib(std::size_t{1} << 20, 'w');
  for (int i = 0; i < 5; ++i) worker.set("worker/" + std::to_string(i), mib);
  CHECK(worker.get("worker/4", 1s) == mib);
  CHECK(worker.num_keys() > 5);
  server.stop();
}
