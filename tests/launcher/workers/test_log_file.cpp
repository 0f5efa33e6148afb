// A worker stream's log file (launcher/workers/log_file.hpp): whole lines written, truncated or
// appended; a failed write (ENOSPC from /dev/full) or open counted in lines and reported once,
// after which the file takes no more writes; the first error of the run kept in the tally; a FIFO
// at the path refused without blocking.
#include "launcher/workers/log_file.hpp"

#include <catch2/catch.hpp>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "tests/support/temp_dir.hpp"

using Catch::Matchers::Contains;
using ddp::launcher::LogFile;
using ddp::launcher::LogFileTally;

namespace {

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool write(LogFile& f, const std::string& text) {
  return f.write(text.data(), text.size());
}

}  // namespace

TEST_CASE("log file: lines reach the file, truncated on open or appended", "[log_file]") {
  ddp::testing::TempDir dir("log_file");
  const std::string path = (dir.path / "stdout.log").string();
  LogFileTally tally;
  {
    LogFile f(path, tally);
    CHECK(f.ok());
    CHECK(f.path() == path);
    CHECK(write(f, "one\ntwo\n"));
    CHECK(write(f, "three\n"));
  }
  CHECK(read(path) == "one\ntwo\nthree\n");
  {
    LogFile f(path, tally, true);
    CHECK(write(f, "four\n"));
  }
  CHECK(read(path) == "one\ntwo\nthree\nfour\n");
  {
    LogFile f(path, tally);  // a new run of the same file starts it again
    CHECK(write(f, "five\n"));
  }
  CHECK(read(path) == "five\n");
  CHECK(tally.lines_lost == 0);
  CHECK(tally.first_error.empty());
}

TEST_CASE("log file: a full disk fails the write, counts its lines, and the file takes no more", "[log_file]") {
  LogFileTally tally;
  LogFile f("/dev/full", tally);
  REQUIRE(f.ok());  // opening succeeds: the failure comes with the write
  CHECK_FALSE(write(f, "a\nb\npartial"));
  CHECK_FALSE(f.ok());
  CHECK(tally.lines_lost == 2);  // every line of the failed write (a partial one is not a line)
  CHECK_THAT(tally.first_error, Contains("/dev/full") && Contains("No space left on device"));
  CHECK_FALSE(write(f, "c\n"));
  CHECK(tally.lines_lost == 3);
}

TEST_CASE("log file: an open that fails counts as the first failed write, and the run keeps its first error",
          "[log_file]") {
  ddp::testing::TempDir dir("log_file");
  LogFileTally tally;
  const std::string missing = (dir.path / "no_such_dir" / "stderr.log").string();
  LogFile f(missing, tally);
  CHECK_FALSE(f.ok());
  CHECK(tally.first_error == missing + ": No such file or directory");
  CHECK_FALSE(write(f, "x\ny\n"));
  CHECK(tally.lines_lost == 2);

  LogFile full("/dev/full", tally);
  CHECK_FALSE(write(full, "z\n"));
  CHECK(tally.lines_lost == 3);
  CHECK(tally.first_error == missing + ": No such file or directory");  // the first, not the latest
}

TEST_CASE("log file: a FIFO where the file goes is refused at once, with or without a reader", "[log_file]") {
  // A worker may write the run directory, and so put a FIFO where a later attempt's log goes:
  // opening it must not block the launcher (issue 41).
  ddp::testing::TempDir dir("log_file");
  const std::string fifo = (dir.path / "stderr.log").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  LogFileTally tally;
  LogFile without_reader(fifo, tally);
  CHECK_FALSE(without_reader.ok());
  CHECK(tally.first_error == fifo + ": a FIFO, not a file");
  CHECK_FALSE(write(without_reader, "x\n"));
  CHECK(tally.lines_lost == 1);

  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  REQUIRE(reader >= 0);
  LogFileTally second;
  LogFile with_reader(fifo, second);
  CHECK_FALSE(with_reader.ok());
  CHECK(second.first_error == fifo + ": a FIFO, not a file");
  ::close(reader);
}
