// Unit tests of the TCPStore wire codec: encode_request and RequestParser. Every one of the 19
// query types is encoded and parsed back (empty and binary keys/values, several keys, negative
// deltas, zero counts), fed whole, split in two at every byte boundary and one byte at a time;
// back-to-back requests come out one per call; unknown type bytes and lengths or counts over the
// limits of protocol.hpp are rejected with ProtocolError as soon as the offending prefix arrives,
// before any payload; and the bytes of a real torch 2.6 client (protocol notes, section 9) parse
// to the expected requests.
#include "rendezvous/request_parser.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ddplaunch/rendezvous/error.hpp"
#include "rendezvous/protocol.hpp"
#include "rendezvous/request.hpp"
#include "tests/rendezvous/make_request.hpp"

namespace {

using ddp::rendezvous::encode_request;
using ddp::rendezvous::kMaxKeyCount;
using ddp::rendezvous::kMaxKeyLength;
using ddp::rendezvous::kMaxValueLength;
using ddp::rendezvous::kQueryTypeCount;
using ddp::rendezvous::kValidationMagic;
using ddp::rendezvous::ProtocolError;
using ddp::rendezvous::put_i64;
using ddp::rendezvous::put_str;
using ddp::rendezvous::put_u8;
using ddp::rendezvous::query_name;
using ddp::rendezvous::QueryType;
using ddp::rendezvous::Request;
using ddp::rendezvous::RequestParser;
using ddp::testing::make_request;
using namespace std::string_literals;

// Bytes that are awkward for a codec: NULs, 0xFF, and what looks like a length prefix.
const std::string kBinary = "\0\xff\x01\0\0\0\0\0\0\0k\0"s;

// A few requests of every query type, covering the shapes each type can take on the wire.
std::vector<Request> sample_requests() {
  return {
      make_request(QueryType::Validate, {}, {}, kValidationMagic),
      make_request(QueryType::Validate, {}, {}, 0),
      make_request(QueryType::Ping, {}, {}, 0x266),
      make_request(QueryType::Ping, {}, {}, 0xFFFFFFFF),
      make_request(QueryType::Set, {"/foo"}, {"bar"}),
      make_request(QueryType::Set, {""}, {""}),
      make_request(QueryType::Set, {kBinary}, {kBinary + kBinary}),
      make_request(QueryType::CompareSet, {"/rdzv"}, {"", "Y2FuaW1hZGFt"}),
      make_request(QueryType::CompareSet, {kBinary}, {kBinary, ""}),
      make_request(QueryType::Get, {"/foo"}),
      make_request(QueryType::Get, {""}),
      make_request(QueryType::Add, {"init/"}, {}, 1),
      make_request(QueryType::Add, {"counter"}, {}, -42),
      make_request(QueryType::Add, {kBinary}, {}, INT64_MIN),
      make_request(QueryType::Add, {"c"}, {}, 0),
      make_request(QueryType::Check, {}),
      make_request(QueryType::Check, {"/a", "", kBinary}),
      make_request(QueryType::Wait, {}),
      make_request(QueryType::Wait, {"/a"}),
      make_request(QueryType::Wait, {"/a", "/b", kBinary, "/a"}),
      make_request(QueryType::GetNumKeys),
      make_request(QueryType::DeleteKey, {"/foo"}),
      make_request(QueryType::DeleteKey, {""}),
      make_request(QueryType::Append, {"/log"}, {"line\n"}),
      make_request(QueryType::Append, {kBinary}, {""}),
      make_request(QueryType::MultiGet, {}),
      make_request(QueryType::MultiGet, {"/r/0", "/r/1", "", kBinary}),
      make_request(QueryType::MultiSet, {}, {}),
      make_request(QueryType::MultiSet, {"/k1", "", kBinary}, {"v1", kBinary, ""}),
      make_request(QueryType::CancelWait),
      make_request(QueryType::QueuePush, {"/q"}, {"item"}),
      make_request(QueryType::QueuePush, {""}, {kBinary}),
      make_request(QueryType::QueuePop, {"/q"}),
      make_request(QueryType::QueueLen, {kBinary}),
      make_request(QueryType::ListKeys),
      make_request(QueryType::Barrier, {"/barrier"}, {}, 3),
      make_request(QueryType::Barrier, {kBinary}, {}, -1),
  };
}

// Runs one parser over `chunks` in order and collects every complete request.
std::vector<Request> parse_chunks(const std::vector<std::string_view>& chunks) {
  RequestParser parser;
  std::vector<Request> parsed;
  for (std::string_view chunk : chunks) {
    Request r;
    while (parser.parse(chunk, r)) parsed.push_back(std::move(r));
    REQUIRE(chunk.empty());
  }
  REQUIRE(parser.idle());
  return parsed;
}

std::vector<std::string_view> single_bytes(std::string_view bytes) {
  std::vector<std::string_view> chunks;
  for (std::size_t i = 0; i < bytes.size(); ++i) chunks.push_back(bytes.substr(i, 1));
  return chunks;
}

// A request of `type` whose first string field announces `length` bytes, with no bytes after it.
std::string length_prefix_only(QueryType type, std::uint64_t length) {
  std::string bytes;
  put_u8(bytes, static_cast<std::uint8_t>(type));
  put_i64(bytes, static_cast<std::int64_t>(length));
  return bytes;
}

// Parses `bytes` with a fresh parser, expecting a ProtocolError before the input runs out.
void require_rejected(std::string_view bytes) {
  RequestParser parser;
  Request r;
  REQUIRE_THROWS_AS(parser.parse(bytes, r), ProtocolError);
}

}  // namespace

TEST_CASE("every query type round-trips through encode_request and the parser", "[request_parser]") {
  const auto requests = sample_requests();
  std::vector<bool> seen(kQueryTypeCount, false);
  for (const Request& request : requests) {
    CAPTURE(query_name(request.type), request.keys, request.values, request.integer);
    const std::string bytes = encode_request(request);
    REQUIRE(static_cast<std::uint8_t>(bytes.front()) == static_cast<std::uint8_t>(request.type));
    const auto parsed = parse_chunks({bytes});
    REQUIRE(parsed.size() == 1);
    CHECK(parsed.front() == request);
    seen[static_cast<std::size_t>(request.type)] = true;
  }
  for (std::size_t t = 0; t < seen.size(); ++t) {
    CAPTURE(t);
    CHECK(seen[t]);
  }
}

TEST_CASE("the encoding matches the documented field layout", "[request_parser]") {
  // SET "k" = "vv": type 1, u64 1, 'k', u64 2, 'v', 'v'.
  CHECK(encode_request(make_request(QueryType::Set, {"k"}, {"vv"})) == "\x01\x01\0\0\0\0\0\0\0k\x02\0\0\0\0\0\0\0vv"s);
  // ADD "a" -1: the delta is a two's-complement little-endian i64.
  CHECK(encode_request(make_request(QueryType::Add, {"a"}, {}, -1)) ==
        "\x04\x01\0\0\0\0\0\0\0a\xff\xff\xff\xff\xff\xff\xff\xff"s);
  // CANCEL_WAIT is the type byte alone.
  CHECK(encode_request(make_request(QueryType::CancelWait)) == "\x0c"s);
  // MULTI_SET interleaves keys and values after the count.
  CHECK(encode_request(make_request(QueryType::MultiSet, {"a", "b"}, {"1", "2"})) == "\x0b\x02\0\0\0\0\0\0\0"s +
                                                                                         "\x01\0\0\0\0\0\0\0a"s +
                                                                                         "\x01\0\0\0\0\0\0\0"
                                                                                         "1"s +
                                                                                         "\x01\0\0\0\0\0\0\0b"s +
                                                                                         "\x01\0\0\0\0\0\0\0"
                                                                                         "2"s);
}

TEST_CASE("a request split in two at any byte boundary parses the same", "[request_parser]") {
  for (const Request& request : sample_requests()) {
    CAPTURE(query_name(request.type), request.keys, request.values, request.integer);
    const std::string bytes = encode_request(request);
    const std::string_view view(bytes);
    for (std::size_t cut = 0; cut <= bytes.size(); ++cut) {
      CAPTURE(cut);
      const auto parsed = parse_chunks({view.substr(0, cut), view.substr(cut)});
      REQUIRE(parsed.size() == 1);
      REQUIRE(parsed.front() == request);
    }
  }
}

TEST_CASE("all sample requests concatenated parse back in order, whole and byte by byte", "[request_parser]") {
  const auto requests = sample_requests();
  std::string stream;
  for (const Request& request : requests) stream += encode_request(request);
  CHECK(parse_chunks({stream}) == requests);
  CHECK(parse_chunks(single_bytes(stream)) == requests);
}

TEST_CASE("two requests in one buffer come out one per call", "[request_parser]") {
  const Request first = make_request(QueryType::Set, {"/foo"}, {"bar"});
  const Request second = make_request(QueryType::Get, {"/foo"});
  const std::string first_bytes = encode_request(first);
  const std::string second_bytes = encode_request(second);
  const std::string both = first_bytes + second_bytes;

  RequestParser parser;
  std::string_view input(both);
  Request r;
  REQUIRE(parser.parse(input, r));
  CHECK(r == first);
  // The second request is left untouched in the input.
  CHECK(input == second_bytes);
  CHECK(parser.idle());

  REQUIRE(parser.parse(input, r));
  CHECK(r == second);
  CHECK(input.empty());

  // Nothing left: the parser asks for more bytes and stays idle.
  CHECK_FALSE(parser.parse(input, r));
  CHECK(parser.idle());
}

TEST_CASE("a complete request followed by part of the next keeps the partial one", "[request_parser]") {
  const Request first = make_request(QueryType::CancelWait);
  const Request second = make_request(QueryType::Wait, {"/a", "/b"});
  const std::string second_bytes = encode_request(second);
  const std::string buffer = encode_request(first) + second_bytes.substr(0, 5);

  RequestParser parser;
  std::string_view input(buffer);
  Request r;
  REQUIRE(parser.parse(input, r));
  CHECK(r == first);
  CHECK_FALSE(parser.parse(input, r));
  CHECK(input.empty());
  CHECK_FALSE(parser.idle());

  std::string_view rest = std::string_view(second_bytes).substr(5);
  REQUIRE(parser.parse(rest, r));
  CHECK(r == second);
  CHECK(parser.idle());
}

TEST_CASE("idle is true between requests and false inside one", "[request_parser]") {
  RequestParser parser;
  CHECK(parser.idle());

  Request r;
  std::string_view empty;
  CHECK_FALSE(parser.parse(empty, r));
  CHECK(parser.idle());

  const std::string bytes = encode_request(make_request(QueryType::Set, {"key"}, {"value"}));
  for (std::size_t i = 0; i + 1 < bytes.size(); ++i) {
    CAPTURE(i);
    std::string_view one = std::string_view(bytes).substr(i, 1);
    REQUIRE_FALSE(parser.parse(one, r));
    CHECK(one.empty());
    CHECK_FALSE(parser.idle());
  }
  std::string_view last = std::string_view(bytes).substr(bytes.size() - 1);
  REQUIRE(parser.parse(last, r));
  CHECK(parser.idle());
  CHECK(r == make_request(QueryType::Set, {"key"}, {"value"}));
}

TEST_CASE("an unknown query type byte is a protocol error", "[request_parser]") {
  // 19 is one past BARRIER.
  for (const char byte : {'\x13', '\x14', '\x7f', '\x80', '\xff'}) {
    CAPTURE(static_cast<int>(static_cast<unsigned char>(byte)));
    require_rejected(std::string(1, byte));
  }
  // Also when it follows a good request in the same buffer.
  const std::string buffer = encode_request(make_request(QueryType::GetNumKeys)) + "\xff"s;
  RequestParser parser;
  std::string_view input(buffer);
  Request r;
  REQUIRE(parser.parse(input, r));
  CHECK(r.type == QueryType::GetNumKeys);
  CHECK_THROWS_AS(parser.parse(input, r), ProtocolError);
}

TEST_CASE("a key one byte over the limit is rejected from its length prefix", "[request_parser]") {
  // Only the type byte and the length prefix are sent: the parser must not wait for the bytes.
  for (QueryType type :
       {QueryType::Set, QueryType::CompareSet, QueryType::Get, QueryType::Add, QueryType::DeleteKey, QueryType::Append,
        QueryType::QueuePush, QueryType::QueuePop, QueryType::QueueLen, QueryType::Barrier}) {
    CAPTURE(query_name(type));
    require_rejected(length_prefix_only(type, kMaxKeyLength + 1));
  }
  // The keys of the counted queries are limited too.
  for (QueryType type : {QueryType::Check, QueryType::Wait, QueryType::MultiGet, QueryType::MultiSet}) {
    CAPTURE(query_name(type));
    std::string bytes;
    put_u8(bytes, static_cast<std::uint8_t>(type));
    put_i64(bytes, 2);
    put_str(bytes, "ok");
    if (type == QueryType::MultiSet) put_str(bytes, "value");
    put_i64(bytes, static_cast<std::int64_t>(kMaxKeyLength + 1));
    require_rejected(bytes);
  }
}

TEST_CASE("a value one byte over the limit is rejected from its length prefix", "[request_parser]") {
  const auto rejected_after = [](QueryType type, int strings_before) {
    std::string bytes;
    put_u8(bytes, static_cast<std::uint8_t>(type));
    if (type == QueryType::MultiSet) put_i64(bytes, 1);
    for (int i = 0; i < strings_before; ++i) put_str(bytes, "k");
    put_i64(bytes, static_cast<std::int64_t>(kMaxValueLength + 1));
    require_rejected(bytes);
  };
  rejected_after(QueryType::Set, 1);
  rejected_after(QueryType::Append, 1);
  rejected_after(QueryType::QueuePush, 1);
  rejected_after(QueryType::CompareSet, 1);  // expected
  rejected_after(QueryType::CompareSet, 2);  // desired
  rejected_after(QueryType::MultiSet, 1);
}

TEST_CASE("a 1 TiB length prefix is rejected at once", "[request_parser]") {
  constexpr std::uint64_t kOneTiB = std::uint64_t{1} << 40;
  require_rejected(length_prefix_only(QueryType::Get, kOneTiB));
  require_rejected(length_prefix_only(QueryType::Set, kOneTiB));
  // As a value.
  std::string bytes;
  put_u8(bytes, static_cast<std::uint8_t>(QueryType::Set));
  put_str(bytes, "k");
  put_i64(bytes, static_cast<std::int64_t>(kOneTiB));
  require_rejected(bytes);
  // A length with the top bit set (negative as i64) is huge, not small.
  require_rejected(length_prefix_only(QueryType::Get, ~std::uint64_t{0}));
}

TEST_CASE("a key count one over the limit is rejected from the count", "[request_parser]") {
  for (QueryType type : {QueryType::Check, QueryType::Wait, QueryType::MultiGet, QueryType::MultiSet}) {
    CAPTURE(query_name(type));
    std::string bytes;
    put_u8(bytes, static_cast<std::uint8_t>(type));
    put_i64(bytes, static_cast<std::int64_t>(kMaxKeyCount + 1));
    require_rejected(bytes);
    // 2^40 keys and a "negative" count as well.
    std::string huge;
    put_u8(huge, static_cast<std::uint8_t>(type));
    put_i64(huge, std::int64_t{1} << 40);
    require_rejected(huge);
    std::string negative;
    put_u8(negative, static_cast<std::uint8_t>(type));
    put_i64(negative, -1);
    require_rejected(negative);
  }
}

TEST_CASE("a key of exactly the limit parses", "[request_parser]") {
  const std::string key(kMaxKeyLength, '\x5a');
  const Request set = make_request(QueryType::Set, {key}, {"v"});
  CHECK(parse_chunks({encode_request(set)}) == std::vector<Request>{set});
  const Request wait = make_request(QueryType::Wait, {key, "short"});
  CHECK(parse_chunks(single_bytes(encode_request(wait))) == std::vector<Request>{wait});
}

TEST_CASE("a value of exactly the limit parses", "[request_parser]") {
  const std::string value(kMaxValueLength, '\x01');
  const Request set = make_request(QueryType::Set, {"k"}, {value});
  const std::string bytes = encode_request(set);
  const std::string_view view(bytes);
  CHECK(parse_chunks({bytes}) == std::vector<Request>{set});
  CHECK(parse_chunks({view.substr(0, 4096), view.substr(4096)}) == std::vector<Request>{set});
}

TEST_CASE("the torch 2.6 client's handshake bytes parse to VALIDATE, PING and ADD init/", "[request_parser]") {
  // Section 9 of the protocol notes, as sent by a torch 2.6 client (pid 614).
  const std::string transcript =
      "\x00\xCE\xF7\x85\x3C"s                                                       // VALIDATE
      "\x0D\x66\x02\x00\x00"s                                                       // PING 0x266
      "\x04\x05\x00\x00\x00\x00\x00\x00\x00init/\x01\x00\x00\x00\x00\x00\x00\x00"s  // ADD init/ 1
      "\x01\x04\x00\x00\x00\x00\x00\x00\x00/foo\x03\x00\x00\x00\x00\x00\x00\x00"
      "bar"s                                                                       // SET
      "\x06\x01\x00\x00\x00\x00\x00\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00/foo"s  // WAIT [/foo]
      "\x03\x04\x00\x00\x00\x00\x00\x00\x00/foo"s                                  // GET /foo
      "\x0C"s;                                                                     // CANCEL_WAIT
  const std::vector<Request> expected = {
      make_request(QueryType::Validate, {}, {}, 0x3C85F7CE),
      make_request(QueryType::Ping, {}, {}, 0x266),
      make_request(QueryType::Add, {"init/"}, {}, 1),
      make_request(QueryType::Set, {"/foo"}, {"bar"}),
      make_request(QueryType::Wait, {"/foo"}),
      make_request(QueryType::Get, {"/foo"}),
      make_request(QueryType::CancelWait),
  };
  CHECK(parse_chunks({transcript}) == expected);
  CHECK(parse_chunks(single_bytes(transcript)) == expected);
  CHECK(expected[0].integer == static_cast<std::int64_t>(kValidationMagic));
  // And encode_request reproduces the client's bytes exactly.
  std::string reencoded;
  for (const Request& r : expected) reencoded += encode_request(r);
  CHECK(reencoded == transcript);
}

TEST_CASE("one Request reused for every call gets each request's own fields", "[request_parser]") {
  // The server parses every request of a connection into the same Request (no allocation per
  // request): nothing of an earlier, longer request may show through in a later, shorter one,
  // whether a request arrives whole or split.
  const std::vector<Request> requests = {
      make_request(QueryType::MultiSet, {"/a", "/b", "/c"}, {"1", "2", "3"}),
      make_request(QueryType::Get, {"/a"}),
      make_request(QueryType::Wait, {"/a-much-longer-key-than-the-inline-capacity", "/b"}),
      make_request(QueryType::Ping, {}, {}, 7),
      make_request(QueryType::CompareSet, {"/k"}, {"", std::string(100, 'v')}),
      make_request(QueryType::Add, {"/n"}, {}, -3),
  };
  std::string all;
  for (const auto& r : requests) all += encode_request(r);
  for (const std::size_t chunk : {all.size(), std::size_t{5}, std::size_t{1}}) {
    CAPTURE(chunk);
    RequestParser parser;
    Request reused;
    std::size_t next = 0;
    for (std::size_t at = 0; at < all.size(); at += chunk) {
      std::string_view input = std::string_view(all).substr(at, chunk);
      while (parser.parse(input, reused)) {
        REQUIRE(next < requests.size());
        CHECK(reused == requests[next++]);
        // What the store does with a request: it takes the values.
        for (auto& v : reused.values) std::string().swap(v);
      }
    }
    CHECK(next == requests.size());
    CHECK(parser.idle());
  }
}
