// Unit tests of StoreState, the socket-free TCPStore server state: requests are fed in as Request
// values from numbered connections and the Outgoing replies are checked byte for byte, decoded
// with get_i64/get_u32 as a client would. Covers the VALIDATE handshake, PING, every key-value
// query (SET, GET, ADD, COMPARE_SET's four cases, CHECK, GETNUMKEYS, DELETE_KEY, APPEND,
// MULTI_GET, MULTI_SET, LIST_KEYS), the queues, WAIT with parked waiters (woken by every kind of
// write, all at once, or one per QUEUE_PUSH), CANCEL_WAIT, disconnects while waiting, BARRIER, and
// the counts of parked connections and keys.
#include "rendezvous/store_state.hpp"

// Lets failed comparisons of Replies print the (client, bytes) pairs.
#define CATCH_CONFIG_ENABLE_PAIR_STRINGMAKER
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ddplaunch/rendezvous/error.hpp"
#include "rendezvous/protocol.hpp"
#include "rendezvous/request.hpp"
#include "tests/rendezvous/make_request.hpp"

namespace {

using ddp::rendezvous::CheckResponse;
using ddp::rendezvous::ClientId;
using ddp::rendezvous::get_i64;
using ddp::rendezvous::get_u32;
using ddp::rendezvous::kValidationMagic;
using ddp::rendezvous::Outgoing;
using ddp::rendezvous::ProtocolError;
using ddp::rendezvous::QueryType;
using ddp::rendezvous::Request;
using ddp::rendezvous::StoreState;
using ddp::rendezvous::WaitResponse;
using ddp::testing::make_request;
using namespace std::string_literals;

using Keys = std::vector<std::string>;
// Bytes sent to each connection by one request, concatenated in order.
using Replies = std::map<ClientId, std::string>;

const std::string kStopWaiting(1, static_cast<char>(WaitResponse::StopWaiting));
const std::string kWaitCanceled(1, static_cast<char>(WaitResponse::WaitCanceled));
const std::string kReady(1, static_cast<char>(CheckResponse::Ready));
const std::string kNotReady(1, static_cast<char>(CheckResponse::NotReady));

Request validate_req(std::uint32_t magic = kValidationMagic) {
  return make_request(QueryType::Validate, {}, {}, magic);
}
Request ping_req(std::uint32_t nonce) {
  return make_request(QueryType::Ping, {}, {}, nonce);
}
Request set_req(const std::string& k, const std::string& v) {
  return make_request(QueryType::Set, {k}, {v});
}
Request get_req(const std::string& k) {
  return make_request(QueryType::Get, {k});
}
Request add_req(const std::string& k, std::int64_t delta) {
  return make_request(QueryType::Add, {k}, {}, delta);
}
Request cas_req(const std::string& k, const std::string& expected, const std::string& desired) {
  return make_request(QueryType::CompareSet, {k}, {expected, desired});
}
Request check_req(Keys keys) {
  return make_request(QueryType::Check, std::move(keys));
}
Request wait_req(Keys keys) {
  return make_request(QueryType::Wait, std::move(keys));
}
Request num_keys_req() {
  return make_request(QueryType::GetNumKeys);
}
Request delete_req(const std::string& k) {
  return make_request(QueryType::DeleteKey, {k});
}
Request append_req(const std::string& k, const std::string& v) {
  return make_request(QueryType::Append, {k}, {v});
}
Request multi_get_req(Keys keys) {
  return make_request(QueryType::MultiGet, std::move(keys));
}
Request multi_set_req(Keys keys, Keys values) {
  return make_request(QueryType::MultiSet, std::move(keys), std::move(values));
}
Request cancel_req() {
  return make_request(QueryType::CancelWait);
}
Request push_req(const std::string& k, const std::string& v) {
  return make_request(QueryType::QueuePush, {k}, {v});
}
Request pop_req(const std::string& k) {
  return make_request(QueryType::QueuePop, {k});
}
Request queue_len_req(const std::string& k) {
  return make_request(QueryType::QueueLen, {k});
}
Request list_keys_req() {
  return make_request(QueryType::ListKeys);
}
Request barrier_req(const std::string& k, std::int64_t world) {
  return make_request(QueryType::Barrier, {k}, {}, world);
}

std::int64_t as_i64(const std::string& bytes) {
  REQUIRE(bytes.size() == 8);
  return get_i64(bytes.data());
}

// Reads `n` back-to-back `str` fields (u64 length + bytes) starting at `pos`; `pos` ends after them.
Keys read_strs(const std::string& bytes, std::size_t& pos, std::size_t n) {
  Keys out;
  for (std::size_t i = 0; i < n; ++i) {
    REQUIRE(bytes.size() - pos >= 8);
    const auto len = static_cast<std::size_t>(get_i64(bytes.data() + pos));
    pos += 8;
    REQUIRE(bytes.size() - pos >= len);
    out.push_back(bytes.substr(pos, len));
    pos += len;
  }
  return out;
}

// Decodes a reply that is exactly one `str`.
std::string as_str(const std::string& bytes) {
  std::size_t pos = 0;
  const Keys strs = read_strs(bytes, pos, 1);
  REQUIRE(pos == bytes.size());
  return strs.front();
}

Keys sorted(Keys keys) {
  std::sort(keys.begin(), keys.end());
  return keys;
}

// A StoreState with helpers to feed requests from numbered connections and collect the replies.
class Server {
 public:
  // Connects and validates each of `clients`.
  explicit Server(std::initializer_list<ClientId> clients = {1}) {
    for (ClientId id : clients) join(id);
  }

  void join(ClientId id) {
    state.connect(id);
    REQUIRE(send(id, validate_req()).empty());
  }

  // Every byte the request causes, grouped by the connection it goes to.
  Replies send(ClientId id, Request request) {
    std::vector<Outgoing> out;
    state.handle(id, std::move(request), out);
    Replies replies;
    for (Outgoing& o : out) replies[o.client] += o.bytes;
    return replies;
  }

  // The reply to a request that must answer only its sender.
  std::string call(ClientId id, Request request) {
    const Replies replies = send(id, std::move(request));
    REQUIRE(replies.size() == 1);
    REQUIRE(replies.count(id) == 1);
    return replies.at(id);
  }

  // GET through the wire format.
  std::string get(ClientId id, const std::string& key) { return as_str(call(id, get_req(key))); }

  StoreState state;
};

}  // namespace

TEST_CASE("a first request other than VALIDATE is a protocol error", "[store_state]") {
  for (const Request& first :
       {set_req("k", "v"), ping_req(7), get_req("k"), wait_req({"k"}), cancel_req(), barrier_req("b", 1)}) {
    CAPTURE(static_cast<int>(first.type));
    StoreState state;
    state.connect(1);
    std::vector<Outgoing> out;
    CHECK_THROWS_AS(state.handle(1, first, out), ProtocolError);
    CHECK(out.empty());
    CHECK(state.num_keys() == 0);
    CHECK(state.num_waiting() == 0);
  }
}

TEST_CASE("VALIDATE with the wrong magic is a protocol error", "[store_state]") {
  StoreState state;
  state.connect(1);
  std::vector<Outgoing> out;
  CHECK_THROWS_AS(state.handle(1, validate_req(0x3C85F7CF), out), ProtocolError);
  CHECK_THROWS_AS(state.handle(1, validate_req(0), out), ProtocolError);
  // Byte-swapped magic (a big-endian peer) is wrong too.
  CHECK_THROWS_AS(state.handle(1, validate_req(0xCEF7853C), out), ProtocolError);
  CHECK(out.empty());
}

TEST_CASE("VALIDATE with the right magic is accepted silently", "[store_state]") {
  StoreState state;
  state.connect(1);
  CHECK(state.num_clients() == 1);
  std::vector<Outgoing> out;
  state.handle(1, validate_req(), out);
  CHECK(out.empty());
  // Now ordinary requests work.
  state.handle(1, num_keys_req(), out);
  REQUIRE(out.size() == 1);
  CHECK(out[0].client == 1);
  CHECK(as_i64(out[0].bytes) == 0);
}

TEST_CASE("each connection must validate on its own", "[store_state]") {
  Server server{1};
  server.state.connect(2);
  std::vector<Outgoing> out;
  CHECK_THROWS_AS(server.state.handle(2, set_req("k", "v"), out), ProtocolError);
  CHECK(server.state.num_keys() == 0);
}

TEST_CASE("PING echoes the 4 nonce bytes", "[store_state]") {
  Server server;
  const std::string reply = server.call(1, ping_req(0x266));
  REQUIRE(reply.size() == 4);
  CHECK(get_u32(reply.data()) == 0x266);
  CHECK(reply == "\x66\x02\x00\x00"s);
  CHECK(get_u32(server.call(1, ping_req(0xFFFFFFFF)).data()) == 0xFFFFFFFF);
}

TEST_CASE("SET has no reply and GET returns the value", "[store_state]") {
  Server server{1, 2};
  CHECK(server.send(1, set_req("/foo", "bar")).empty());
  CHECK(server.call(2, get_req("/foo")) ==
        "\x03\0\0\0\0\0\0\0"
        "bar"s);
  CHECK(server.get(1, "/foo") == "bar");
  CHECK(server.send(1, set_req("/foo", "\0\xff"s)).empty());
  CHECK(server.get(2, "/foo") == "\0\xff"s);
  CHECK(server.send(1, set_req("", "")).empty());
  CHECK(server.get(2, "").empty());
  CHECK(server.state.num_keys() == 2);
}

TEST_CASE("GET of a missing key replies an empty string", "[store_state]") {
  Server server;
  CHECK(server.call(1, get_req("/missing")) == std::string(8, '\0'));
  CHECK(server.state.num_keys() == 0);
}

TEST_CASE("ADD replies the new value as i64 and stores decimal text", "[store_state]") {
  Server server{1, 2};
  CHECK(as_i64(server.call(1, add_req("init/", 1))) == 1);
  CHECK(as_i64(server.call(2, add_req("init/", 1))) == 2);
  CHECK(as_i64(server.call(1, add_req("init/", 5))) == 7);
  CHECK(server.get(1, "init/") == "7");
  CHECK(as_i64(server.call(1, add_req("init/", -10))) == -3);
  CHECK(server.get(1, "init/") == "-3");
  CHECK(as_i64(server.call(2, add_req("init/", 0))) == -3);
  // ADD continues from a value written by SET.
  server.send(1, set_req("c", "40"));
  CHECK(as_i64(server.call(1, add_req("c", 2))) == 42);
}

TEST_CASE("ADD on a non-numeric value is a protocol error and changes nothing", "[store_state]") {
  Server server{1, 2};
  server.send(1, set_req("k", "abc"));
  std::vector<Outgoing> out;
  CHECK_THROWS_AS(server.state.handle(1, add_req("k", 1), out), ProtocolError);
  CHECK(out.empty());
  CHECK(server.get(2, "k") == "abc");
  CHECK(server.state.num_keys() == 1);
}

TEST_CASE("COMPARE_SET's four cases on the wire", "[store_state]") {
  Server server;
  SECTION("missing key, empty expected: stores and replies desired") {
    CHECK(as_str(server.call(1, cas_req("/rdzv", "", "Y2FuaW1hZGFt"))) == "Y2FuaW1hZGFt");
    CHECK(server.get(1, "/rdzv") == "Y2FuaW1hZGFt");
  }
  SECTION("missing key, non-empty expected: replies expected and creates nothing") {
    CHECK(as_str(server.call(1, cas_req("/rdzv", "token", "state"))) == "token");
    CHECK(server.state.num_keys() == 0);
    CHECK(server.call(1, check_req({"/rdzv"})) == kNotReady);
  }
  SECTION("present and equal: stores and replies desired") {
    server.send(1, set_req("/rdzv", "token"));
    CHECK(as_str(server.call(1, cas_req("/rdzv", "token", "state"))) == "state");
    CHECK(server.get(1, "/rdzv") == "state");
  }
  SECTION("present and different: replies the current value unchanged") {
    server.send(1, set_req("/rdzv", "current"));
    CHECK(as_str(server.call(1, cas_req("/rdzv", "token", "state"))) == "current");
    CHECK(server.get(1, "/rdzv") == "current");
  }
}

TEST_CASE("CHECK answers READY only when every key exists", "[store_state]") {
  Server server;
  CHECK(server.call(1, check_req({})) == kReady);
  CHECK(server.call(1, check_req({"a"})) == kNotReady);
  server.send(1, set_req("a", ""));
  CHECK(server.call(1, check_req({"a"})) == kReady);
  CHECK(server.call(1, check_req({"a", "b"})) == kNotReady);
  server.send(1, set_req("b", "x"));
  CHECK(server.call(1, check_req({"a", "b", "a"})) == kReady);
  CHECK(kReady == "\x00"s);
  CHECK(kNotReady == "\x01"s);
}

TEST_CASE("WAIT on present keys, or on none, answers STOP_WAITING at once", "[store_state]") {
  Server server;
  CHECK(server.call(1, wait_req({})) == kStopWaiting);
  server.send(1, set_req("a", "1"));
  server.send(1, set_req("b", "2"));
  CHECK(server.call(1, wait_req({"a", "b"})) == kStopWaiting);
  CHECK(kStopWaiting == "\x00"s);
  CHECK(server.state.num_waiting() == 0);
  // The connection is free for another WAIT right away.
  CHECK(server.call(1, wait_req({"a"})) == kStopWaiting);
}

TEST_CASE("WAIT on missing keys completes once every one of them is written", "[store_state]") {
  // Waiter 1 parks on five keys; writer 2 creates them with five different kinds of write.
  Server server{1, 2};
  server.send(2, set_req("present", "x"));
  CHECK(server.send(1, wait_req({"by_set", "by_add", "present", "by_append", "by_multi_set", "by_cas"})).empty());
  CHECK(server.state.num_waiting() == 1);

  CHECK(server.send(2, set_req("by_set", "v")).empty());
  CHECK(server.call(2, add_req("by_add", 3)) == "\x03\0\0\0\0\0\0\0"s);
  CHECK(server.send(2, append_req("by_append", "tail")).empty());
  CHECK(server.send(2, multi_set_req({"unrelated", "by_multi_set"}, {"1", "2"})).empty());
  // A COMPARE_SET that writes nothing does not count.
  CHECK(as_str(server.call(2, cas_req("by_cas", "not-there", "v"))) == "not-there");
  CHECK(server.state.num_waiting() == 1);

  // The last missing key, created by COMPARE_SET: the writer gets its reply, the waiter wakes.
  const Replies replies = server.send(2, cas_req("by_cas", "", "created"));
  CHECK(replies == Replies{{1, kStopWaiting},
                           {2,
                            "\x07\0\0\0\0\0\0\0"
                            "created"s}});
  CHECK(server.state.num_waiting() == 0);

  // Later writes send nothing more to the former waiter.
  CHECK(server.send(2, set_req("by_set", "again")).empty());
}

TEST_CASE("writes of keys a WAIT does not name leave it parked", "[store_state]") {
  Server server{1, 2};
  CHECK(server.send(1, wait_req({"a"})).empty());
  CHECK(server.send(2, set_req("b", "1")).empty());
  CHECK(server.call(2, add_req("a/", 1)) == "\x01\0\0\0\0\0\0\0"s);
  CHECK(server.send(2, push_req("q", "x")).empty());
  CHECK(server.state.num_waiting() == 1);
  CHECK(server.send(2, set_req("a", "1")) == Replies{{1, kStopWaiting}});
}

TEST_CASE("a key named twice in one WAIT is satisfied by one write", "[store_state]") {
  Server server{1, 2};
  CHECK(server.send(1, wait_req({"k", "k"})).empty());
  CHECK(server.send(2, set_req("k", "v")) == Replies{{1, kStopWaiting}});
  CHECK(server.state.num_waiting() == 0);

  // And mixed with another missing key, each write counts once.
  CHECK(server.send(1, wait_req({"x", "y", "x"})).empty());
  CHECK(server.send(2, set_req("x", "1")).empty());
  CHECK(server.send(2, set_req("x", "2")).empty());
  CHECK(server.send(2, set_req("y", "1")) == Replies{{1, kStopWaiting}});
}

TEST_CASE("one SET wakes every connection waiting on the key", "[store_state]") {
  Server server{1, 2, 3};
  CHECK(server.send(1, wait_req({"k"})).empty());
  CHECK(server.send(2, wait_req({"k"})).empty());
  CHECK(server.state.num_waiting() == 2);
  CHECK(server.send(3, set_req("k", "v")) == Replies{{1, kStopWaiting}, {2, kStopWaiting}});
  CHECK(server.state.num_waiting() == 0);
}

TEST_CASE("a ping-pong on fresh keys wakes the right connection every round", "[store_state]") {
  // Waits on fresh keys park and unpark all the time (the waiter table recycles its entries):
  // well past the number of entries it keeps, every SET wakes exactly its partner's WAIT, and
  // nothing stays parked. Two pairs interleave, so recycled entries move between keys.
  Server server{1, 2, 3, 4};
  for (int round = 0; round < 300; ++round) {
    for (const ClientId ping : {ClientId{1}, ClientId{3}}) {
      const ClientId pong = ping + 1;
      const std::string key = "/pp/" + std::to_string(ping) + "/" + std::to_string(round);
      CHECK(server.send(pong, wait_req({key})).empty());
      CHECK(server.send(ping, set_req(key, "x")) == Replies{{pong, kStopWaiting}});
      CHECK(server.send(ping, wait_req({key + "/a"})).empty());
    }
    for (const ClientId ping : {ClientId{1}, ClientId{3}}) {
      const std::string key = "/pp/" + std::to_string(ping) + "/" + std::to_string(round);
      CHECK(server.send(ping + 1, set_req(key + "/a", "y")) == Replies{{ping, kStopWaiting}});
    }
    REQUIRE(server.state.num_waiting() == 0);
    REQUIRE(server.state.num_parked_keys() == 0);
  }
  // A recycled entry holds nobody from before: a disconnect and a later SET of an old key wake
  // no one.
  CHECK(server.send(2, wait_req({"/late"})).empty());
  server.state.disconnect(2);
  CHECK(server.send(1, set_req("/late", "v")).empty());
  CHECK(server.send(1, set_req("/pp/1/0", "again")).empty());
}

TEST_CASE("DELETE_KEY replies 1 or 0", "[store_state]") {
  Server server;
  server.send(1, set_req("k", "v"));
  CHECK(as_i64(server.call(1, delete_req("k"))) == 1);
  CHECK(as_i64(server.call(1, delete_req("k"))) == 0);
  CHECK(as_i64(server.call(1, delete_req("never"))) == 0);
  CHECK(server.state.num_keys() == 0);
  CHECK(server.call(1, check_req({"k"})) == kNotReady);
}

TEST_CASE("DELETE_KEY wakes nobody and does not re-arm a satisfied key", "[store_state]") {
  Server server{1, 2};
  CHECK(server.send(1, wait_req({"a", "b"})).empty());
  server.send(2, set_req("x", "1"));
  CHECK(as_i64(server.call(2, delete_req("x"))) == 1);
  // Deleting a key being waited for (missing) or one already satisfied sends nothing.
  CHECK(as_i64(server.call(2, delete_req("b"))) == 0);
  CHECK(server.send(2, set_req("a", "1")).empty());
  CHECK(as_i64(server.call(2, delete_req("a"))) == 1);
  CHECK(server.state.num_waiting() == 1);
  // Only "b" is still missing; "a" stays counted although it is gone again.
  CHECK(server.send(2, set_req("b", "1")) == Replies{{1, kStopWaiting}});
}

TEST_CASE("a key deleted and then waited for makes the WAIT park again", "[store_state]") {
  Server server{1, 2};
  server.send(2, set_req("k", "v"));
  CHECK(server.call(1, wait_req({"k"})) == kStopWaiting);
  CHECK(as_i64(server.call(2, delete_req("k"))) == 1);
  CHECK(server.send(1, wait_req({"k"})).empty());
  CHECK(server.state.num_waiting() == 1);
  CHECK(server.send(2, set_req("k", "again")) == Replies{{1, kStopWaiting}});
}

TEST_CASE("CANCEL_WAIT with nothing pending still replies WAIT_CANCELED", "[store_state]") {
  Server server;
  CHECK(server.call(1, cancel_req()) == kWaitCanceled);
  CHECK(kWaitCanceled == "\x01"s);
  CHECK(server.call(1, cancel_req()) == kWaitCanceled);
}

TEST_CASE("CANCEL_WAIT drops a pending WAIT without a stray STOP_WAITING", "[store_state]") {
  Server server{1, 2, 3};
  CHECK(server.send(1, wait_req({"k", "other"})).empty());
  CHECK(server.send(3, wait_req({"k"})).empty());
  CHECK(server.state.num_waiting() == 2);
  CHECK(server.call(1, cancel_req()) == kWaitCanceled);
  CHECK(server.state.num_waiting() == 1);
  // The SET wakes only the connection still waiting.
  CHECK(server.send(2, set_req("k", "v")) == Replies{{3, kStopWaiting}});
  CHECK(server.send(2, set_req("other", "v")).empty());
  // The cancelled connection can wait again afterwards.
  CHECK(server.send(1, wait_req({"later"})).empty());
  CHECK(server.send(2, set_req("later", "v")) == Replies{{1, kStopWaiting}});
}

TEST_CASE("a second WAIT while one is pending is a protocol error", "[store_state]") {
  Server server{1, 2};
  CHECK(server.send(1, wait_req({"k"})).empty());
  std::vector<Outgoing> out;
  CHECK_THROWS_AS(server.state.handle(1, wait_req({"j"}), out), ProtocolError);
  CHECK_THROWS_AS(server.state.handle(1, wait_req({}), out), ProtocolError);
  CHECK_THROWS_AS(server.state.handle(1, barrier_req("b", 2), out), ProtocolError);
  CHECK(out.empty());
  // The rejected BARRIER did not count an arrival.
  CHECK(server.state.num_keys() == 0);
  // The first WAIT is still intact.
  CHECK(server.send(2, set_req("j", "v")).empty());
  CHECK(server.send(2, set_req("k", "v")) == Replies{{1, kStopWaiting}});
}

TEST_CASE("a disconnect drops the connection's pending WAIT", "[store_state]") {
  Server server{1, 2, 3};
  CHECK(server.send(1, wait_req({"k"})).empty());
  CHECK(server.send(3, wait_req({"k"})).empty());
  CHECK(server.state.num_waiting() == 2);
  CHECK(server.state.num_clients() == 3);
  server.state.disconnect(1);
  CHECK(server.state.num_waiting() == 1);
  CHECK(server.state.num_clients() == 2);
  CHECK(server.send(2, set_req("k", "v")) == Replies{{3, kStopWaiting}});
  // Forgetting an unknown or already gone connection is harmless.
  server.state.disconnect(1);
  server.state.disconnect(99);
  CHECK(server.state.num_clients() == 2);
}

TEST_CASE("a disconnect of the only waiter leaves later writes silent", "[store_state]") {
  Server server{1, 2};
  CHECK(server.send(1, wait_req({"a", "b"})).empty());
  CHECK(server.send(2, set_req("a", "v")).empty());
  server.state.disconnect(1);
  CHECK(server.state.num_waiting() == 0);
  CHECK(server.send(2, set_req("b", "v")).empty());
  CHECK(server.send(2, push_req("a", "v")).empty());
}

TEST_CASE("GETNUMKEYS counts the keys of the map", "[store_state]") {
  Server server;
  CHECK(as_i64(server.call(1, num_keys_req())) == 0);
  server.call(1, add_req("init/", 1));
  server.send(1, set_req("/a", "1"));
  server.send(1, set_req("/a", "2"));
  server.send(1, append_req("/b", "x"));
  CHECK(as_i64(server.call(1, num_keys_req())) == 3);
  server.call(1, delete_req("/a"));
  CHECK(as_i64(server.call(1, num_keys_req())) == 2);
  CHECK(server.state.num_keys() == 2);
}

TEST_CASE("APPEND concatenates, creating a missing key", "[store_state]") {
  Server server;
  CHECK(server.send(1, append_req("/log", "ab")).empty());
  CHECK(server.send(1, append_req("/log", "\0c"s)).empty());
  CHECK(server.get(1, "/log") == "ab\0c"s);
  server.send(1, set_req("/log", "reset"));
  server.send(1, append_req("/log", "!"));
  CHECK(server.get(1, "/log") == "reset!");
}

TEST_CASE("MULTI_GET replies the values back to back in request order", "[store_state]") {
  Server server;
  server.send(1, set_req("/r/0", "zero"));
  server.send(1, set_req("/r/1", ""));
  server.send(1, set_req("/r/2", "\0two"s));
  const std::string reply = server.call(1, multi_get_req({"/r/2", "/r/0", "/r/1", "/r/2"}));
  std::size_t pos = 0;
  CHECK(read_strs(reply, pos, 4) == Keys{"\0two"s, "zero", "", "\0two"s});
  CHECK(pos == reply.size());
  CHECK(server.call(1, multi_get_req({})).empty());
}

TEST_CASE("MULTI_SET sets every pair in order and wakes their waiters", "[store_state]") {
  Server server{1, 2};
  CHECK(server.send(1, wait_req({"a", "b"})).empty());
  CHECK(server.send(2, multi_set_req({"a", "b", "a"}, {"1", "2", "3"})) == Replies{{1, kStopWaiting}});
  CHECK(server.get(2, "a") == "3");
  CHECK(server.get(2, "b") == "2");
  CHECK(server.send(2, multi_set_req({}, {})).empty());
  CHECK(server.state.num_keys() == 2);
}

TEST_CASE("queues are FIFO: QUEUE_POP replies the length before the pop, then the value", "[store_state]") {
  Server server;
  CHECK(as_i64(server.call(1, queue_len_req("/q"))) == 0);
  CHECK(server.send(1, push_req("/q", "first")).empty());
  CHECK(server.send(1, push_req("/q", "\0second"s)).empty());
  CHECK(as_i64(server.call(1, queue_len_req("/q"))) == 2);

  std::string reply = server.call(1, pop_req("/q"));
  REQUIRE(reply.size() >= 8);
  CHECK(get_i64(reply.data()) == 2);
  CHECK(as_str(reply.substr(8)) == "first");

  reply = server.call(1, pop_req("/q"));
  REQUIRE(reply.size() >= 8);
  CHECK(get_i64(reply.data()) == 1);
  CHECK(as_str(reply.substr(8)) == "\0second"s);

  // An empty (or unknown) queue answers just the i64 0.
  CHECK(server.call(1, pop_req("/q")) == std::string(8, '\0'));
  CHECK(server.call(1, pop_req("/never")) == std::string(8, '\0'));
  CHECK(as_i64(server.call(1, queue_len_req("/q"))) == 0);
}

TEST_CASE("queues are not keys of the map", "[store_state]") {
  Server server;
  server.send(1, push_req("/q", "item"));
  CHECK(as_i64(server.call(1, num_keys_req())) == 0);
  CHECK(as_i64(server.call(1, list_keys_req())) == 0);
  CHECK(server.get(1, "/q").empty());
  // And a key of the map is not a queue.
  server.send(1, set_req("/k", "v"));
  CHECK(as_i64(server.call(1, queue_len_req("/k"))) == 0);
}

TEST_CASE("CHECK and WAIT see a non-empty queue as present", "[store_state]") {
  Server server;
  CHECK(server.call(1, check_req({"/q"})) == kNotReady);
  server.send(1, push_req("/q", "item"));
  CHECK(server.call(1, check_req({"/q"})) == kReady);
  CHECK(server.call(1, wait_req({"/q"})) == kStopWaiting);
  server.call(1, pop_req("/q"));
  CHECK(server.call(1, check_req({"/q"})) == kNotReady);
}

TEST_CASE("QUEUE_PUSH wakes one connection waiting on the queue per push", "[store_state]") {
  Server server{1, 2, 3};
  CHECK(server.send(1, wait_req({"/q"})).empty());
  CHECK(server.send(2, wait_req({"/q"})).empty());
  CHECK(server.state.num_waiting() == 2);

  const Replies first = server.send(3, push_req("/q", "a"));
  REQUIRE(first.size() == 1);
  const ClientId woken = first.begin()->first;
  CHECK((woken == 1 || woken == 2));
  CHECK(first.begin()->second == kStopWaiting);
  CHECK(server.state.num_waiting() == 1);

  const Replies second = server.send(3, push_req("/q", "b"));
  REQUIRE(second.size() == 1);
  CHECK(second.begin()->first == (woken == 1 ? 2u : 1u));
  CHECK(second.begin()->second == kStopWaiting);
  CHECK(server.state.num_waiting() == 0);

  // Nobody left: a third push sends nothing.
  CHECK(server.send(3, push_req("/q", "c")).empty());
  CHECK(as_i64(server.call(3, queue_len_req("/q"))) == 3);
}

TEST_CASE("LIST_KEYS replies the count and every key", "[store_state]") {
  Server server;
  std::string reply = server.call(1, list_keys_req());
  CHECK(as_i64(reply) == 0);

  server.call(1, add_req("init/", 1));
  server.send(1, set_req("/a", "1"));
  server.send(1, set_req("\0bin"s, ""));
  reply = server.call(1, list_keys_req());
  REQUIRE(reply.size() >= 8);
  CHECK(get_i64(reply.data()) == 3);
  std::size_t pos = 8;
  CHECK(sorted(read_strs(reply, pos, 3)) == sorted({"init/", "/a", "\0bin"s}));
  CHECK(pos == reply.size());
}

TEST_CASE("BARRIER parks arrivals until the world is complete, then releases all", "[store_state]") {
  Server server{1, 2, 3, 4};
  CHECK(server.send(1, barrier_req("/b", 3)).empty());
  CHECK(server.send(2, barrier_req("/b", 3)).empty());
  CHECK(server.state.num_waiting() == 2);
  // The counter is an ordinary key holding decimal text.
  CHECK(server.get(4, "/b") == "2");

  const Replies replies = server.send(3, barrier_req("/b", 3));
  CHECK(replies == Replies{{1, kStopWaiting}, {2, kStopWaiting}, {3, kStopWaiting}});
  CHECK(server.state.num_waiting() == 0);
  CHECK(server.get(4, "/b") == "3");

  // A late arrival passes at once.
  CHECK(server.call(4, barrier_req("/b", 3)) == kStopWaiting);
  CHECK(server.get(4, "/b") == "4");
  CHECK(server.state.num_waiting() == 0);
  // The released connections can use the connection for another WAIT.
  CHECK(server.call(1, wait_req({"/b"})) == kStopWaiting);
}

TEST_CASE("BARRIER on a key holding non-numeric text is a protocol error", "[store_state]") {
  Server server{1, 2};
  server.send(1, set_req("/b", "not a counter"));
  std::vector<Outgoing> out;
  CHECK_THROWS_AS(server.state.handle(2, barrier_req("/b", 2), out), ProtocolError);
  CHECK(out.empty());
  CHECK(server.state.num_waiting() == 0);
  CHECK(server.get(1, "/b") == "not a counter");
  // The connection is not left half-parked: it may WAIT afterwards.
  CHECK(server.call(2, wait_req({"/b"})) == kStopWaiting);
}

TEST_CASE("BARRIER with a world of 1 passes at once", "[store_state]") {
  Server server;
  CHECK(server.call(1, barrier_req("/solo", 1)) == kStopWaiting);
  CHECK(server.get(1, "/solo") == "1");
  CHECK(server.state.num_waiting() == 0);
}

TEST_CASE("barriers on different keys are independent", "[store_state]") {
  Server server{1, 2, 3};
  CHECK(server.send(1, barrier_req("/x", 2)).empty());
  CHECK(server.send(2, barrier_req("/y", 2)).empty());
  CHECK(server.send(3, barrier_req("/x", 2)) == Replies{{1, kStopWaiting}, {3, kStopWaiting}});
  CHECK(server.state.num_waiting() == 1);
}

TEST_CASE("a BARRIER arrival wakes WAITs on the barrier key", "[store_state]") {
  Server server{1, 2};
  CHECK(server.send(1, wait_req({"/b"})).empty());
  CHECK(server.send(2, barrier_req("/b", 2)) == Replies{{1, kStopWaiting}});
  CHECK(server.state.num_waiting() == 1);
}

TEST_CASE("CANCEL_WAIT during a BARRIER drops the parked arrival", "[store_state]") {
  Server server{1, 2, 3};
  CHECK(server.send(1, barrier_req("/b", 3)).empty());
  CHECK(server.send(2, barrier_req("/b", 3)).empty());
  CHECK(server.call(1, cancel_req()) == kWaitCanceled);
  CHECK(server.state.num_waiting() == 1);
  // The arrival still counts; the completion releases only those still parked.
  CHECK(server.get(3, "/b") == "2");
  CHECK(server.send(3, barrier_req("/b", 3)) == Replies{{2, kStopWaiting}, {3, kStopWaiting}});
  CHECK(server.state.num_waiting() == 0);
  // The cancelled connection may wait again.
  CHECK(server.call(1, wait_req({"/b"})) == kStopWaiting);
}

TEST_CASE("a disconnect during a BARRIER drops the parked arrival", "[store_state]") {
  Server server{1, 2, 3};
  CHECK(server.send(1, barrier_req("/b", 3)).empty());
  CHECK(server.send(2, barrier_req("/b", 3)).empty());
  server.state.disconnect(1);
  CHECK(server.state.num_waiting() == 1);
  CHECK(server.send(3, barrier_req("/b", 3)) == Replies{{2, kStopWaiting}, {3, kStopWaiting}});
}

TEST_CASE("num_parked_keys counts the keys and barriers connections are parked on", "[store_state]") {
  Server server{1, 2, 3, 4};
  CHECK(server.state.num_parked_keys() == 0);
  CHECK(server.send(1, wait_req({"a", "b"})).empty());
  CHECK(server.send(2, wait_req({"a"})).empty());
  CHECK(server.state.num_parked_keys() == 2);
  CHECK(server.state.num_waiting() == 2);

  // A parked BARRIER arrival counts its key.
  CHECK(server.send(3, barrier_req("bar", 2)).empty());
  CHECK(server.state.num_parked_keys() == 3);
  CHECK(server.state.num_waiting() == 3);

  // Waking every waiter of "a" forgets the key; connection 1 stays parked on "b".
  CHECK(server.send(4, set_req("a", "1")) == Replies{{2, kStopWaiting}});
  CHECK(server.state.num_parked_keys() == 2);
  CHECK(server.state.num_waiting() == 2);

  // A disconnect and a CANCEL_WAIT drop the rest.
  server.state.disconnect(1);
  CHECK(server.state.num_parked_keys() == 1);
  CHECK(server.state.num_waiting() == 1);
  CHECK(server.call(3, cancel_req()) == kWaitCanceled);
  CHECK(server.state.num_parked_keys() == 0);
  CHECK(server.state.num_waiting() == 0);
}
