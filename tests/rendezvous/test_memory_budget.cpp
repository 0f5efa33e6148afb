// Unit tests of the store's memory accounting without sockets: MemoryBudget's rule and
// ConnectionCharge, RequestParser's count of a partial request and its limit per request,
// KeyValueMap's byte count and APPEND's value limit, and StoreState::cost as an upper bound of
// what a request adds.
#include "rendezvous/memory_budget.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "ddplaunch/rendezvous/error.hpp"
#include "ddplaunch/rendezvous/key_value_map.hpp"
#include "rendezvous/protocol.hpp"
#include "rendezvous/request_parser.hpp"
#include "rendezvous/store_state.hpp"
#include "tests/rendezvous/make_request.hpp"

namespace {

namespace rdzv = ddp::rendezvous;
using Kind = rdzv::MemoryBudget::Kind;
using ddp::testing::make_request;
constexpr std::size_t kMiB = std::size_t{1} << 20;

}  // namespace

TEST_CASE("the budget admits each share up to 3/4 and the total up to the limit", "[budget]") {
  rdzv::MemoryBudget b(4 * kMiB);
  CHECK(b.fits(Kind::Stored, 3 * kMiB));
  CHECK_FALSE(b.fits(Kind::Stored, 3 * kMiB + 1));
  b.charge(Kind::Stored, 3 * kMiB);
  CHECK(b.fits(Kind::Unsent, kMiB));
  CHECK_FALSE(b.fits(Kind::Buffered, kMiB + 1));  // the total
  b.release(Kind::Stored, 3 * kMiB);
  b.charge(Kind::Unsent, 2 * kMiB);
  CHECK_FALSE(b.fits(Kind::Buffered, kMiB + 1));  // requests and replies share 3/4
  CHECK(b.fits(Kind::Stored, 2 * kMiB));
  CHECK_FALSE(b.fits(Kind::Stored, SIZE_MAX));
  CHECK(b.used() == 2 * kMiB);
  CHECK(b.describe() == "stored 0 B, requests 0 B, replies 2.0 MiB of 4.0 MiB");
  CHECK_THROWS_AS(rdzv::MemoryBudget(1000), ddp::Error);
}

TEST_CASE("refusal names what does not fit", "[budget]") {
  rdzv::MemoryBudget b(4 * kMiB);
  CHECK(b.refusal(kMiB, 8).empty());
  CHECK_THAT(b.refusal(3 * kMiB + 1, 0), Catch::Contains("storing 3.0 MiB more"));
  CHECK_THAT(b.refusal(0, 5 * kMiB), Catch::Contains("a reply of 5.0 MiB"));
  b.charge(Kind::Stored, 2 * kMiB);
  CHECK_THAT(b.refusal(kMiB, kMiB + 1), Catch::Contains("a reply of"));  // both together pass 4 MiB
}

TEST_CASE("a stranger may add stored data only while all of it stays within 1/16 of the budget", "[budget]") {
  rdzv::MemoryBudget b(16 * kMiB);
  CHECK(b.fits_stranger(kMiB));
  CHECK_FALSE(b.fits_stranger(kMiB + 1));
  CHECK(b.admits(kMiB, 8, true));
  CHECK_FALSE(b.admits(kMiB + 1, 8, true));
  CHECK(b.admits(kMiB + 1, 8));  // the job's own connections: the whole stored share
  CHECK_THAT(b.refusal(kMiB + 1, 8, true),
             Catch::Contains("would pass the 1/16 of the store's memory budget (1.0 MiB) that connections without "
                             "the job secret may fill"));
  CHECK(b.refusal(kMiB + 1, 8).empty());
  b.charge(Kind::Stored, kMiB);  // strangers filled their part: the job keeps 3/4 - 1/16 of the limit
  CHECK_FALSE(b.fits_stranger(1));
  CHECK(b.fits(Kind::Stored, 11 * kMiB));
  b.charge(Kind::Stored, 11 * kMiB);  // and once the store's share is full, the usual reason
  CHECK_THAT(b.refusal(1, 8, true), Catch::StartsWith("storing 1 B more would pass the store's memory budget"));
  b.release(Kind::Stored, 12 * kMiB);
  b.charge(Kind::Unsent, 12 * kMiB);  // replies do not count against the strangers' part
  CHECK(b.fits_stranger(kMiB));
}

TEST_CASE("a connection's charge refuses growth that does not fit and releases all at close", "[budget]") {
  rdzv::MemoryBudget b(4 * kMiB);
  {
    rdzv::ConnectionCharge c(b);
    CHECK(c.buffer(2 * kMiB));
    CHECK_FALSE(c.buffer(4 * kMiB));
    CHECK(c.buffered() == 2 * kMiB);
    c.queued(100);
    c.sent(40);
    CHECK(b.used() == 2 * kMiB + 60);
    CHECK(c.buffer(0));
  }
  CHECK(b.used() == 0);
}

TEST_CASE("the parser counts a partial request by what it holds, not by what it announces", "[budget]") {
  rdzv::RequestParser p;
  CHECK(p.buffered_bytes() == 0);
  std::string bytes = rdzv::encode_request(make_request(rdzv::QueryType::Set, {"/k"}, {std::string(kMiB, 'v')}));
  std::string_view head(bytes.data(), 1 + 8 + 2 + 8 + 10);  // 10 bytes of a 1 MiB value
  rdzv::Request r;
  REQUIRE_FALSE(p.parse(head, r));
  CHECK(p.buffered_bytes() > 10);
  CHECK(p.buffered_bytes() < 128 * 1024);  // the first reservation, not the announced 1 MiB
  std::string_view rest(bytes.data() + 29, bytes.size() - 29 - 1);
  REQUIRE_FALSE(p.parse(rest, r));
  CHECK(p.buffered_bytes() >= kMiB);
  CHECK(p.buffered_bytes() < kMiB + 1024);  // capacity never past the announced length
  std::string_view last(bytes.data() + bytes.size() - 1, 1);
  REQUIRE(p.parse(last, r));
  CHECK(p.buffered_bytes() == 0);
  CHECK(p.idle());
}

TEST_CASE("one request's keys and values together are limited to kMaxRequestBytes", "[budget]") {
  rdzv::RequestParser p;
  std::string bytes;
  rdzv::put_u8(bytes, static_cast<std::uint8_t>(rdzv::QueryType::MultiSet));
  rdzv::put_i64(bytes, 9);
  const std::string value(rdzv::kMaxValueLength, 'v');
  for (int i = 0; i < 8; ++i) {
    rdzv::put_str(bytes, "");
    rdzv::put_str(bytes, value);
  }
  rdzv::put_str(bytes, "");
  rdzv::put_i64(bytes, 1);  // the 9th value: 1 byte past 64 MiB
  std::string_view in(bytes);
  rdzv::Request r;
  CHECK_THROWS_WITH(p.parse(in, r), Catch::Contains("MULTI_SET announces more than 67108864 bytes"));
}

TEST_CASE("APPEND refuses to grow a value past the value limit and changes nothing", "[budget]") {
  rdzv::KeyValueMap m;
  m.append("k", std::string(rdzv::kMaxValueLength - 1, 'a'));
  m.append("k", "b");
  const std::size_t bytes = m.bytes();
  CHECK_THROWS_WITH(m.append("k", "c"), Catch::Contains("would pass the value limit of 8388608 bytes"));
  CHECK(m.find("k")->size() == rdzv::kMaxValueLength);
  CHECK(m.bytes() == bytes);
  CHECK_THROWS_AS(m.append("new", std::string(rdzv::kMaxValueLength + 1, 'x')), rdzv::ProtocolError);
  CHECK_FALSE(m.contains("new"));
}

TEST_CASE("the map's byte count follows every change and returns to zero", "[budget]") {
  rdzv::KeyValueMap m;
  m.set("a", std::string(1000, 'x'));
  CHECK(m.bytes() >= 1001 + rdzv::KeyValueMap::kEntryOverhead);
  m.add("n", 5);
  bool changed = false;
  m.compare_set("a", std::string(1000, 'x'), "y", changed);
  CHECK(changed);
  m.append("a", std::string(5000, 'z'));
  m.erase("a");
  m.erase("n");
  CHECK(m.bytes() == 0);
}

TEST_CASE("StoreState::cost bounds what a request adds to the stored bytes and its reply", "[budget]") {
  rdzv::StoreState s;
  s.connect(1);
  std::vector<rdzv::Outgoing> out;
  s.handle(1, make_request(rdzv::QueryType::Validate, {}, {}, rdzv::kValidationMagic), out);
  const std::vector<rdzv::Request> requests{
      make_request(rdzv::QueryType::Set, {"/k"}, {std::string(100000, 'v')}),
      make_request(rdzv::QueryType::Append, {"/k"}, {std::string(70000, 'a')}),
      make_request(rdzv::QueryType::Append, {"/new"}, {"x"}),
      make_request(rdzv::QueryType::Add, {"/n"}, {}, -12345678901234),
      make_request(rdzv::QueryType::CompareSet, {"/c"}, {"", std::string(3000, 'c')}),
      make_request(rdzv::QueryType::MultiSet, {"/m1", "/m2"}, {"1", std::string(5000, '2')}),
      make_request(rdzv::QueryType::QueuePush, {"/q"}, {std::string(300, 'q')}),
      make_request(rdzv::QueryType::QueuePush, {"/q"}, {"second"}),
      make_request(rdzv::QueryType::Barrier, {"/b"}, {}, 2),
      make_request(rdzv::QueryType::Get, {"/k"}),
      make_request(rdzv::QueryType::MultiGet, {"/k", "/k", "/missing"}),
      make_request(rdzv::QueryType::QueuePop, {"/q"}),
      make_request(rdzv::QueryType::ListKeys),
      make_request(rdzv::QueryType::Set, {"/k"}, {"short"}),
      make_request(rdzv::QueryType::DeleteKey, {"/k"}),
  };
  for (const auto& r : requests) {
    INFO(rdzv::query_name(r.type));
    const rdzv::RequestCost cost = s.cost(r);
    const std::size_t before = s.stored_bytes();
    out.clear();
    s.handle(1, r, out);
    CHECK(s.stored_bytes() <= before + cost.stored);
    std::size_t reply = 0;
    for (const auto& o : out) reply += o.bytes.size();
    CHECK(reply <= cost.reply);
  }
  CHECK(s.cost(make_request(rdzv::QueryType::MultiGet, std::vector<std::string>(1000, "/c"))).reply > 3000000);
}
