// Arrival records (issue 14, defect 9), without a GPU: ranks as writers over an in-memory store.
// A timeout names the ranks that never arrived at the collective; nothing is written while waits
// are short; a store that fails claims nothing.
#include "runtime/arrival_records.hpp"

#include <memory>
#include <string>

#include "ddplaunch/rendezvous/error.hpp"
#include "ddplaunch/rendezvous/memory_store.hpp"

#include <catch2/catch.hpp>

using ddp::runtime::ArrivalRecords;

namespace {

// A store whose every call fails, as one whose host has gone.
class GoneStore : public ddp::rendezvous::Store {
 public:
  [[noreturn]] static void gone() { throw ddp::rendezvous::ConnectionError("store gone"); }
  void set(const std::string&, const std::string&) override { gone(); }
  std::string get(const std::string&, Duration) override { gone(); }
  std::int64_t add(const std::string&, std::int64_t) override { gone(); }
  std::string compare_set(const std::string&, const std::string&, const std::string&) override { gone(); }
  bool check(const std::vector<std::string>&) override { gone(); }
  void wait(const std::vector<std::string>&, Duration) override { gone(); }
  bool delete_key(const std::string&) override { gone(); }
  std::int64_t num_keys() override { gone(); }
};

}  // namespace

TEST_CASE("the ranks that never arrived are named, the waiting ones apart", "[arrival]") {
  auto store = std::make_shared<ddp::rendezvous::MemoryStore>();
  std::vector<ArrivalRecords> ranks;
  for (int r = 0; r < 6; ++r) ranks.emplace_back(store, "nccl", r, 6);
  for (int r : {0, 1, 2, 4}) ranks[static_cast<std::size_t>(r)].waiting_long(12);
  CHECK(ranks[0].missing(12) == std::vector<int>{3, 5});
  CHECK(ranks[0].missing_phrase(12) == "; ranks 3,5 never arrived at collective #12 (ranks 0-2,4 waited in it)");
  CHECK(ranks[4].missing_phrase(12) == "; ranks 3,5 never arrived at collective #12 (ranks 0-2,4 waited in it)");
  // Another collective's records do not count.
  CHECK(ranks[0].missing(13) == std::vector<int>{1, 2, 3, 4, 5});
  ranks[3].waiting_long(12);
  ranks[5].waiting_long(12);
  CHECK(ranks[0].missing(12).empty());
  CHECK(ranks[0].missing_phrase(12).empty());
}

TEST_CASE("one missing rank reads as one", "[arrival]") {
  auto store = std::make_shared<ddp::rendezvous::MemoryStore>();
  ArrivalRecords a(store, "p", 0, 2);
  a.waiting_long(1);
  CHECK(a.missing_phrase(1) == "; rank 1 never arrived at collective #1 (rank 0 waited in it)");
  CHECK(store->num_keys() == 1);
}

TEST_CASE("a store that is gone claims nothing and throws nothing", "[arrival]") {
  ArrivalRecords a(std::make_shared<GoneStore>(), "p", 0, 4);
  a.waiting_long(3);
  CHECK(a.missing(3).empty());
  CHECK(a.missing_phrase(3).empty());
}
