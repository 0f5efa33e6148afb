// read_error_file (error_file.hpp): a worker's TORCHELASTIC_ERROR_FILE as @record writes it, no
// file, a file that is not a record, and what the worker may put there instead of a file: a FIFO
// (before, the launcher blocked for ever opening it) or a directory, each a record with `problem`.
#include "launcher/report/error_file.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

using ddp::launcher::read_error_file;

TEST_CASE("an error file: a record, none, not a record, not a file", "[report]") {
  const std::string dir = "/tmp/ddplaunch-test-error-file-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/error.json";

  CHECK_FALSE(read_error_file(path).has_value());
  CHECK_FALSE(read_error_file("").has_value());

  std::ofstream(path) << R"({"message": {"message": "ValueError: boom", "extraInfo": {"py_callstack": "tb",
                                                                                         "timestamp": "17"}}})";
  const auto record = read_error_file(path);
  REQUIRE(record.has_value());
  CHECK(record->message == "ValueError: boom");
  CHECK(record->traceback == "tb");
  CHECK(record->timestamp == 17);
  CHECK(record->problem.empty());

  std::ofstream(path) << "not json";
  CHECK_THAT(read_error_file(path)->problem, Catch::StartsWith("not an error record (not json"));

  std::filesystem::remove(path);
  REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  const auto fifo = read_error_file(path);
  REQUIRE(fifo.has_value());
  CHECK_THAT(fifo->problem, Catch::StartsWith("TORCHELASTIC_ERROR_FILE=" + path + " is a FIFO, not a regular file"));
  CHECK(fifo->message.empty());

  std::filesystem::remove(path);
  std::filesystem::create_directories(path);
  CHECK_THAT(read_error_file(path)->problem, Catch::Contains("is a directory"));
  std::filesystem::remove_all(dir);
}
