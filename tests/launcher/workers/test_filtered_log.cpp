// FilteredLog: only lines containing a filter reach the file, each with the prefix; an empty
// filter matches every line; several writers share the file (appending), as the workers of one
// attempt do.
#include "launcher/workers/filtered_log.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace {

using ddp::launcher::FilteredLog;
using ddp::launcher::LogFileTally;

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("only matching lines are copied, with the prefix, from every writer", "[filtered_log]") {
  const auto path = std::filesystem::temp_directory_path() / ("filtered_" + std::to_string(::getpid()) + ".log");
  std::filesystem::remove(path);
  LogFileTally tally;
  {
    FilteredLog rank0(path.string(), {"loss", "a,b"}, tally);
    FilteredLog rank1(path.string(), {"loss", "a,b"}, tally);
    const std::string out0 = "step 1\nloss=0.5\nsee a,b here\n";
    const std::string out1 = "loss=0.7\nnothing\n";
    rank0.write("[0]:", out0.data(), out0.size());
    rank1.write("[1]:", out1.data(), out1.size());
  }
  CHECK(read_file(path) == "[0]:loss=0.5\n[0]:see a,b here\n[1]:loss=0.7\n");
  CHECK(tally.lines_lost == 0);
  std::filesystem::remove(path);
}

TEST_CASE("an empty filter matches every line, as torchrun's `'' in line`", "[filtered_log]") {
  CHECK(FilteredLog::matches("anything\n", {"x", ""}));
  CHECK_FALSE(FilteredLog::matches("anything\n", {"x"}));
  CHECK_FALSE(FilteredLog::matches("anything\n", {}));
}
