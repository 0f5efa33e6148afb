// The collective-progress table: what a worker writes in its slot is what the launcher reads, in
// another process, through the inherited descriptor; bad descriptors are refused with the fix.
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include "common/collective_progress.hpp"

using ddp::CollectiveKind;
using ddp::ProgressTable;
using ddp::ProgressWriter;

namespace {
ddp::EnvLookup progress_env(const std::string& value) {
  return ddp::map_env({{ddp::kProgressVariable, value}});
}
ddp::EnvLookup slot_env(const ProgressTable& table, int slot) {
  return progress_env(ddp::progress_variable_value(table.fd(), slot));
}
}  // namespace

TEST_CASE("a fresh table has every slot empty and unattached", "[progress]") {
  ProgressTable table = ProgressTable::create(3);
  CHECK(table.slots() == 3);
  for (int i = 0; i < 3; ++i) {
    const ddp::CollectiveProgress p = table.read(i);
    CHECK_FALSE(p.attached());
    CHECK(p.entered == 0);
    CHECK_FALSE(p.inside());
  }
}

TEST_CASE("what another process writes in its slot, the table reads", "[progress]") {
  ProgressTable table = ProgressTable::create(2);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    auto writer = ProgressWriter::from_env(slot_env(table, 1));
    if (!writer) ::_exit(3);
    for (int i = 0; i < 5; ++i) {
      writer->enter(CollectiveKind::Allreduce, 4096);
      writer->leave();
    }
    writer->enter(CollectiveKind::Barrier, 0);  // and stays inside
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  const ddp::CollectiveProgress p = table.read(1);
  CHECK(p.pid == child);
  CHECK(p.entered == 6);
  CHECK(p.completed == 5);
  CHECK(p.inside());
  CHECK(p.kind == CollectiveKind::Barrier);
  CHECK(p.entered_ns >= p.completed_ns);
  CHECK(p.completed_ns > 0);
  CHECK_FALSE(table.read(0).attached());

  table.reset();
  CHECK_FALSE(table.read(1).attached());
  CHECK(table.read(1).entered == 0);
}

TEST_CASE("a reader never sees a torn slot while the writer runs", "[progress]") {
  ProgressTable table = ProgressTable::create(1);
  auto writer = ProgressWriter::from_env(slot_env(table, 0));
  REQUIRE(writer);
  std::thread t([&] {
    for (int i = 0; i < 200000; ++i) {
      writer->enter(CollectiveKind::Allreduce, static_cast<std::uint64_t>(i));
      writer->leave();
    }
  });
  std::uint64_t last = 0;
  for (int i = 0; i < 200000; ++i) {
    const ddp::CollectiveProgress p = table.read(0);
    // Entered n carries bytes n-1; completed never passes entered; nothing goes backwards.
    if (p.entered > 0) REQUIRE(p.bytes == p.entered - 1);
    REQUIRE(p.completed <= p.entered);
    REQUIRE(p.completed >= last);
    last = p.completed;
  }
  t.join();
  CHECK(table.read(0).completed == 200000);
}

TEST_CASE("a second writer in one process goes on counting", "[progress]") {
  ProgressTable table = ProgressTable::create(1);
  {
    auto first = ProgressWriter::from_env(slot_env(table, 0));
    first->enter(CollectiveKind::Broadcast, 8);
    first->leave();
  }
  auto second = ProgressWriter::from_env(slot_env(table, 0));
  second->enter(CollectiveKind::Allgather, 8);
  CHECK(table.read(0).entered == 2);
  CHECK(table.read(0).kind == CollectiveKind::Allgather);
}

TEST_CASE("no variable means no progress, a bad one is refused with the fix", "[progress]") {
  CHECK_FALSE(ProgressWriter::from_env(ddp::map_env({})));
  CHECK_FALSE(ProgressWriter::from_env(progress_env("0")));
  const auto message_of = [](const std::string& value) {
    try {
      ProgressWriter::from_env(progress_env(value));
    } catch (const ddp::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(message_of("x").find("DDPLAUNCH_PROGRESS='x' is not <descriptor>:<slot>") != std::string::npos);
  CHECK(message_of("x").find("unset it") != std::string::npos);
  CHECK(message_of("5:0x").find("is not <descriptor>:<slot>") != std::string::npos);
  CHECK(message_of("1:0").find("is not <descriptor>:<slot>") != std::string::npos);
  CHECK(message_of("987:0").find("names no open descriptor") != std::string::npos);
  ProgressTable table = ProgressTable::create(2);
  CHECK(message_of(ddp::progress_variable_value(table.fd(), 2)).find("is not a progress table with a slot 2") !=
        std::string::npos);
}

TEST_CASE("each collective entered is kept in the slot's ring, the last kEntryRing of them", "[progress]") {
  ProgressTable table = ProgressTable::create(2);
  auto writer = ProgressWriter::from_env(slot_env(table, 1));
  REQUIRE(writer);
  const std::int64_t before = ddp::realtime_ns();
  const std::size_t total = ddp::kEntryRing + 10;
  for (std::size_t i = 0; i < total; ++i) {
    writer->enter(i % 2 ? CollectiveKind::Broadcast : CollectiveKind::Allreduce, 8 * i);
    writer->leave();
  }
  const auto all = table.entries(1, 0);
  REQUIRE(all.size() == ddp::kEntryRing);
  CHECK(all.front().seq == 11);  // the first ten were overwritten
  CHECK(all.back().seq == total);
  CHECK(all.back().bytes == 8 * (total - 1));
  CHECK(all.back().kind == CollectiveKind::Broadcast);
  CHECK(all.front().entered_ns >= before);
  CHECK(all.back().entered_ns >= all.front().entered_ns);
  const auto newer = table.entries(1, total - 3);
  REQUIRE(newer.size() == 3);
  CHECK(newer.front().seq == total - 2);
  CHECK(table.entries(0, 0).empty());
  table.reset();
  CHECK(table.entries(1, 0).empty());
}
