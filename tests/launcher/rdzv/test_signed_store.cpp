// SignedStore and the job secret's primitives: HMAC-SHA256 against RFC 4231, what fails the
// check (another secret, key, job or tampered value), that a forged value is ignored (get waits
// past it, compare_set replaces it) and reported once, and that a namespace view and a job view
// agree on a record.
#include "launcher/rdzv/signed_store.hpp"

#include <catch2/catch.hpp>

#include <future>
#include <mutex>
#include <thread>

#include "common/log.hpp"
#include "ddplaunch/rendezvous/error.hpp"
#include "ddplaunch/rendezvous/memory_store.hpp"
#include "launcher/rdzv/job_secret.hpp"
#include "launcher/rdzv/job_store.hpp"

namespace {

using ddp::launcher::SignedStore;
using ddp::rendezvous::MemoryStore;
using namespace std::chrono_literals;

const std::string kSecret = "a-job-secret-of-enough-bytes";

// Collects warnings for one test.
struct Warnings {
  std::mutex mutex;
  std::vector<std::string> lines;
  Warnings() {
    ddp::log::set_sink([this](ddp::log::Level, std::string line) {
      std::lock_guard<std::mutex> lock(mutex);
      lines.push_back(std::move(line));
    });
  }
  ~Warnings() { ddp::log::set_sink(nullptr); }
  std::size_t count() {
    std::lock_guard<std::mutex> lock(mutex);
    return lines.size();
  }
};

}  // namespace

TEST_CASE("HMAC-SHA256 matches RFC 4231 test case 2", "[secret]") {
  CHECK(ddp::launcher::to_hex(ddp::launcher::hmac_sha256("Jefe", "what do ya want for nothing?")) ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  CHECK(ddp::launcher::same_bytes("abc", "abc"));
  CHECK_FALSE(ddp::launcher::same_bytes("abc", "abd"));
  CHECK_FALSE(ddp::launcher::same_bytes("abc", "abcd"));
}

TEST_CASE("a sealed value opens only under its own secret, key and job", "[secret]") {
  auto inner = std::make_shared<MemoryStore>();
  SignedStore s(inner, kSecret, "ddplaunch/t/job");
  const std::string sealed = s.seal("r0/outcome", "value\nwith bytes\x1b");
  CHECK(s.open("r0/outcome", sealed) == "value\nwith bytes\x1b");
  CHECK_FALSE(s.open("r1/outcome", sealed));                                                     // moved to another key
  CHECK_FALSE(SignedStore(inner, kSecret + "x", "ddplaunch/t/job").open("r0/outcome", sealed));  // other secret
  CHECK_FALSE(SignedStore(inner, kSecret, "ddplaunch/t/other").open("r0/outcome", sealed));      // other job
  std::string tampered = sealed;
  tampered.back() = 'X';
  CHECK_FALSE(s.open("r0/outcome", tampered));
  CHECK_FALSE(s.open("r0/outcome", "success"));
  CHECK_FALSE(s.open("r0/outcome", ""));
}

TEST_CASE("set and get round-trip, the stored bytes carry the MAC", "[secret]") {
  auto inner = std::make_shared<MemoryStore>();
  SignedStore s(inner, kSecret, "ctx");
  s.set("k", "v");
  CHECK(s.get("k", 1s) == "v");
  CHECK(inner->get("k", 1s).rfind("ddps1:", 0) == 0);
  CHECK(s.forged_count() == 0);
}

TEST_CASE("a forged value is ignored: get waits past it, reported once", "[secret]") {
  Warnings warnings;
  auto inner = std::make_shared<MemoryStore>();
  SignedStore s(inner, kSecret, "ctx");
  inner->set("r0/ready", "ok");
  CHECK_THROWS_AS(s.get("r0/ready", 300ms), ddp::rendezvous::TimeoutError);
  CHECK_THROWS_AS(s.get("r0/ready", 100ms), ddp::rendezvous::TimeoutError);
  CHECK(s.forged_count() >= 2);
  CHECK(warnings.count() == 1);  // once per key
  CHECK_THAT(warnings.lines.front(), Catch::Contains("r0/ready") && Catch::Contains("job-secret check"));

  // A genuine write replaces it while a reader waits: the reader gets the genuine value.
  auto reader = std::async(std::launch::async, [&] { return s.get("r0/ready", 10s); });
  std::this_thread::sleep_for(200ms);  // let the reader see the forged value first (not required)
  SignedStore(inner, kSecret, "ctx").set("r0/ready", "genuine");
  CHECK(reader.get() == "genuine");
}

TEST_CASE("compare_set: a forged holder does not count as the first writer", "[secret]") {
  Warnings warnings;
  auto inner = std::make_shared<MemoryStore>();
  SignedStore s(inner, kSecret, "ctx");
  inner->set("r0/node/1", "squatted");
  CHECK(s.compare_set("r0/node/1", "", "mine") == "mine");
  CHECK(s.get("r0/node/1", 1s) == "mine");
  // A genuine holder does count: the second writer gets the first's value.
  CHECK(s.compare_set("r0/node/1", "", "second") == "mine");
  // With an expected value, a forged holder is a missing key: nothing is set.
  inner->set("x", "forged");
  CHECK(s.compare_set("x", "old", "new") == "old");
  CHECK(inner->get("x", 1s) == "forged");
  CHECK(warnings.count() == 2);
}

TEST_CASE("job_stores: the namespace view and the job view sign the same full key", "[secret]") {
  auto inner = std::make_shared<MemoryStore>();
  const auto views = ddp::launcher::job_stores(inner, "run", kSecret);
  views.root->set("run/r0/ready", "error: told through the namespace view");
  CHECK(views.job->get("r0/ready", 1s) == "error: told through the namespace view");
  const std::string space = ddp::launcher::store_namespace(kSecret);
  CHECK(space.rfind("ddplaunch/", 0) == 0);
  CHECK(space.size() == std::string("ddplaunch/").size() + 32);
  CHECK(inner->check({space + "/run/r0/ready"}));
  // Without a secret: plain "ddplaunch/<run_id>/" keys, as before.
  const auto plain = ddp::launcher::job_stores(inner, "run", "");
  plain.job->set("r0/x", "1");
  CHECK(inner->get("ddplaunch/run/r0/x", 1s) == "1");
}
