// Unit tests of KeyValueMap, the key-value semantics shared by the server state and the in-memory
// store: set/find/append (which creates a missing key)/erase/size/keys with arbitrary bytes,
// ADD's counters stored as decimal text (starting from 0, negative deltas, add(key, 0) to read,
// rejection of non-numeric values without touching them) and COMPARE_SET's four documented cases,
// including the quirk that a missing key with a non-empty expected value answers `expected`
// without creating the key, together with the `changed` flag.
#include "ddplaunch/rendezvous/key_value_map.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "ddplaunch/rendezvous/error.hpp"

namespace {

using ddp::rendezvous::KeyValueMap;
using ddp::rendezvous::ProtocolError;
using namespace std::string_literals;

std::vector<std::string> sorted_keys(const KeyValueMap& map) {
  auto keys = map.keys();
  std::sort(keys.begin(), keys.end());
  return keys;
}

}  // namespace

TEST_CASE("an empty map has no keys", "[key_value_map]") {
  const KeyValueMap map;
  CHECK(map.size() == 0);
  CHECK(map.keys().empty());
  CHECK(map.find("a") == nullptr);
  CHECK_FALSE(map.contains("a"));
}

TEST_CASE("set stores, overwrites and find reads back", "[key_value_map]") {
  KeyValueMap map;
  map.set("/foo", "bar");
  REQUIRE(map.find("/foo") != nullptr);
  CHECK(*map.find("/foo") == "bar");
  CHECK(map.contains("/foo"));
  CHECK(map.size() == 1);

  map.set("/foo", "baz");
  CHECK(*map.find("/foo") == "baz");
  CHECK(map.size() == 1);

  // Empty keys and values are ordinary entries.
  map.set("", "");
  REQUIRE(map.find("") != nullptr);
  CHECK(map.find("")->empty());
  CHECK(map.size() == 2);
}

TEST_CASE("keys and values are arbitrary bytes", "[key_value_map]") {
  KeyValueMap map;
  const std::string key = "a\0b"s;
  const std::string value = "\0\xff\0"s;
  map.set(key, value);
  CHECK(map.find("a") == nullptr);
  CHECK(map.find("a\0c"s) == nullptr);
  REQUIRE(map.find(key) != nullptr);
  CHECK(*map.find(key) == value);
  CHECK(map.find(key)->size() == 3);
}

TEST_CASE("append concatenates and creates a missing key", "[key_value_map]") {
  KeyValueMap map;
  map.append("/log", "one");
  REQUIRE(map.find("/log") != nullptr);
  CHECK(*map.find("/log") == "one");
  map.append("/log", ",two");
  map.append("/log", "\0"s);
  CHECK(*map.find("/log") == "one,two\0"s);

  // Appending nothing to a missing key still creates it, empty.
  map.append("/empty", "");
  REQUIRE(map.find("/empty") != nullptr);
  CHECK(map.find("/empty")->empty());
  CHECK(map.size() == 2);
}

TEST_CASE("erase removes a key and reports whether it was there", "[key_value_map]") {
  KeyValueMap map;
  map.set("a", "1");
  map.set("b", "2");
  CHECK(map.erase("a"));
  CHECK(map.find("a") == nullptr);
  CHECK_FALSE(map.contains("a"));
  CHECK(map.size() == 1);
  CHECK_FALSE(map.erase("a"));
  CHECK_FALSE(map.erase("never"));
  CHECK(map.size() == 1);
  CHECK(*map.find("b") == "2");
}

TEST_CASE("keys lists every key once", "[key_value_map]") {
  KeyValueMap map;
  map.set("init/", "2");
  map.set("/b", "x");
  map.set("/a", "y");
  map.set("/a", "z");
  map.append("\0"s, "w");
  CHECK(map.size() == 4);
  CHECK(sorted_keys(map) == std::vector<std::string>{"\0"s, "/a", "/b", "init/"});
}

TEST_CASE("add starts a missing counter at zero and stores decimal text", "[key_value_map]") {
  KeyValueMap map;
  CHECK(map.add("init/", 1) == 1);
  REQUIRE(map.find("init/") != nullptr);
  CHECK(*map.find("init/") == "1");
  CHECK(map.add("init/", 6) == 7);
  CHECK(*map.find("init/") == "7");

  CHECK(map.add("neg", -3) == -3);
  CHECK(*map.find("neg") == "-3");
  CHECK(map.add("neg", 10) == 7);
  CHECK(*map.find("neg") == "7");
  CHECK(map.add("neg", -7) == 0);
  CHECK(*map.find("neg") == "0");
}

TEST_CASE("add of 0 reads a counter and creates a missing one as \"0\"", "[key_value_map]") {
  KeyValueMap map;
  map.set("c", "41");
  CHECK(map.add("c", 0) == 41);
  CHECK(*map.find("c") == "41");
  CHECK(map.add("missing", 0) == 0);
  REQUIRE(map.find("missing") != nullptr);
  CHECK(*map.find("missing") == "0");
}

TEST_CASE("add continues from a value written by set", "[key_value_map]") {
  KeyValueMap map;
  map.set("c", "-12");
  CHECK(map.add("c", 2) == -10);
  CHECK(*map.find("c") == "-10");
  map.set("big", std::to_string(INT64_MAX - 1));
  CHECK(map.add("big", 1) == INT64_MAX);
  CHECK(*map.find("big") == std::to_string(INT64_MAX));
}

TEST_CASE("add on a non-numeric value throws and leaves it unchanged", "[key_value_map]") {
  for (const std::string& bad : {"abc"s, ""s, "12abc"s, "1.5"s, "\0"s, "--1"s, "0x10"s, "99999999999999999999"s}) {
    CAPTURE(bad);
    KeyValueMap map;
    map.set("k", bad);
    CHECK_THROWS_AS(map.add("k", 1), ProtocolError);
    REQUIRE(map.find("k") != nullptr);
    CHECK(*map.find("k") == bad);
    CHECK(map.size() == 1);
  }
}

TEST_CASE("compare_set on a missing key with empty expected creates it", "[key_value_map]") {
  KeyValueMap map;
  bool changed = false;
  CHECK(map.compare_set("/rdzv", "", "Y2FuaW1hZGFt", changed) == "Y2FuaW1hZGFt");
  CHECK(changed);
  REQUIRE(map.find("/rdzv") != nullptr);
  CHECK(*map.find("/rdzv") == "Y2FuaW1hZGFt");
}

TEST_CASE("compare_set on a missing key with non-empty expected returns expected and creates nothing",
          "[key_value_map]") {
  KeyValueMap map;
  bool changed = true;
  CHECK(map.compare_set("/rdzv", "token", "new", changed) == "token");
  CHECK_FALSE(changed);
  CHECK(map.find("/rdzv") == nullptr);
  CHECK(map.size() == 0);
}

TEST_CASE("compare_set on a matching value stores desired", "[key_value_map]") {
  KeyValueMap map;
  map.set("k", "old");
  bool changed = false;
  CHECK(map.compare_set("k", "old", "new", changed) == "new");
  CHECK(changed);
  CHECK(*map.find("k") == "new");

  // A present but empty value matches an empty expected.
  map.set("e", "");
  changed = false;
  CHECK(map.compare_set("e", "", "filled", changed) == "filled");
  CHECK(changed);
  CHECK(*map.find("e") == "filled");

  // Writing the same value counts as a write.
  changed = false;
  CHECK(map.compare_set("k", "new", "new", changed) == "new");
  CHECK(changed);
}

TEST_CASE("compare_set on a different value returns the current one unchanged", "[key_value_map]") {
  KeyValueMap map;
  map.set("k", "current");
  bool changed = true;
  CHECK(map.compare_set("k", "stale", "desired", changed) == "current");
  CHECK_FALSE(changed);
  CHECK(*map.find("k") == "current");

  // An empty expected does not match a present non-empty value.
  changed = true;
  CHECK(map.compare_set("k", "", "desired", changed) == "current");
  CHECK_FALSE(changed);
  CHECK(*map.find("k") == "current");
  CHECK(map.size() == 1);
}

TEST_CASE("compare_set compares bytes exactly", "[key_value_map]") {
  KeyValueMap map;
  map.set("k", "a\0b"s);
  bool changed = true;
  CHECK(map.compare_set("k", "a", "x", changed) == "a\0b"s);
  CHECK_FALSE(changed);
  CHECK(map.compare_set("k", "a\0b"s, "\0"s, changed) == "\0"s);
  CHECK(changed);
  CHECK(*map.find("k") == "\0"s);
}

TEST_CASE("a key hashed once (KeyRef) finds what its bytes stored, and the reverse", "[key_value_map]") {
  using ddp::rendezvous::KeyRef;
  KeyValueMap map;
  const std::string key = "/rank/3";
  const KeyRef hashed(key);
  CHECK(hashed.hash() == KeyRef(std::string_view("/rank/3")).hash());
  map.set(KeyRef(hashed.bytes(), hashed.hash()), "a");
  REQUIRE(map.find(key) != nullptr);
  CHECK(*map.find(key) == "a");
  map.set(key, "b");
  CHECK(*map.find(hashed) == "b");
  CHECK(map.size() == 1);
  CHECK(map.erase(hashed));
  CHECK(map.add(hashed, 5) == 5);
  CHECK(map.find(key) != nullptr);
}

TEST_CASE("keys with equal hashes but different bytes stay apart", "[key_value_map]") {
  using ddp::rendezvous::KeyRef;
  KeyValueMap map;
  // A forged hash stands for a collision: equality still compares the bytes.
  map.set(KeyRef("a", 7), "1");
  map.set(KeyRef("b", 7), "2");
  CHECK(map.size() == 2);
  CHECK(*map.find(KeyRef("a", 7)) == "1");
  CHECK(*map.find(KeyRef("b", 7)) == "2");
  CHECK(map.erase(KeyRef("a", 7)));
  CHECK(map.find(KeyRef("a", 7)) == nullptr);
  CHECK(*map.find(KeyRef("b", 7)) == "2");
}
