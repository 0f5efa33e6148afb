// check_output_file (output_file.hpp): the check, made at the start, that --summary_json and
// --event_log can be written: a missing or unwritable directory, a directory given as the file,
// a read-only file are each one UsageError naming the flag and the path; a writable place passes
// and nothing is created.
#include "launcher/report/output_file.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/support/usage_error_of.hpp"

namespace {

using ddp::launcher::check_output_file;

std::string error_of(const std::string& path) {
  return ddp::testing::usage_error_of([&] { check_output_file("--summary_json", path); });
}

}  // namespace

TEST_CASE("an output file is checked where it will be written, and nothing is created", "[report]") {
  const std::string dir = "/tmp/ddplaunch-test-output-file-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);

  SECTION("a writable directory passes, and the file is not made") {
    CHECK(error_of(dir + "/s.json") == "<no exception>");
    CHECK_FALSE(std::filesystem::exists(dir + "/s.json"));
    std::ofstream(dir + "/old.json") << "{}";
    CHECK(error_of(dir + "/old.json") == "<no exception>");
  }
  SECTION("a missing directory") {
    CHECK(error_of(dir + "/no/such/s.json") ==
          "--summary_json " + dir + "/no/such/s.json: directory " + dir +
              "/no/such does not exist; create it or give a file in an existing directory");
  }
  SECTION("a file where the directory should be") {
    std::ofstream(dir + "/plain") << "x";
    CHECK_THAT(error_of(dir + "/plain/s.json"), Catch::Contains("--summary_json " + dir + "/plain/s.json") &&
                                                    Catch::Contains("give a file in an existing directory"));
  }
  SECTION("a directory given as the file") {
    CHECK(error_of(dir) == "--summary_json " + dir + " is a directory; give a file name");
  }
  if (::geteuid() != 0) {  // root writes anyway
    SECTION("a read-only directory or file") {
      std::filesystem::create_directories(dir + "/ro");
      std::ofstream(dir + "/ro.json") << "{}";
      ::chmod((dir + "/ro").c_str(), 0555);
      ::chmod((dir + "/ro.json").c_str(), 0444);
      CHECK_THAT(error_of(dir + "/ro/s.json"), Catch::Contains("cannot create files in " + dir + "/ro"));
      CHECK_THAT(error_of(dir + "/ro.json"), Catch::Contains("cannot write it"));
      ::chmod((dir + "/ro").c_str(), 0755);
    }
  }
  std::filesystem::remove_all(dir);
}
