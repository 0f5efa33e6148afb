// check_log_directory(): a writable directory with room passes; a missing one, or a floor above
// what is free, fails naming the directory and the numbers.
#include "launcher/health/disk_check.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace {

using namespace ddp::launcher;

struct TempDir {
  std::string path;
  TempDir() {
    std::string t = (std::filesystem::temp_directory_path() / "ddp_disk_check_XXXXXX").string();
    path = ::mkdtemp(t.data());
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

}  // namespace

TEST_CASE("a writable directory with room passes and leaves nothing behind") {
  TempDir dir;
  const CheckResult r = check_log_directory(dir.path, 1);
  CHECK(r.verdict == CheckResult::Verdict::Healthy);
  CHECK(r.summary.find("free in " + dir.path) != std::string::npos);
  CHECK(std::filesystem::is_empty(dir.path));
}

TEST_CASE("a directory that does not exist fails, naming it and the fix") {
  const CheckResult r = check_log_directory("/nonexistent/ddp_run", 0);
  CHECK(r.failed());
  CHECK(r.summary.find("cannot create a file in /nonexistent/ddp_run") != std::string::npos);
  CHECK(r.summary.find("--log_dir") != std::string::npos);
}

TEST_CASE("less room than the floor fails with both numbers") {
  TempDir dir;
  const CheckResult r = check_log_directory(dir.path, std::uint64_t{1} << 62);
  CHECK(r.failed());
  CHECK(r.summary.find("only ") == 0);
  CHECK(r.summary.find("MiB needed") != std::string::npos);
}
