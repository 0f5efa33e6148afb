// The logging facility: levels, the prefix on every line, the sink, DDPLAUNCH_LOG_LEVEL.
#include "common/log.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>
#include <vector>

#include "ddplaunch/common/error.hpp"

namespace {

namespace log = ddp::log;

struct Capture {
  std::vector<std::string> lines;
  Capture() {
    log::set_program("test");
    log::set_level(log::Level::Info);
    log::set_sink([this](log::Level, std::string line) { lines.push_back(std::move(line)); });
  }
  ~Capture() {
    log::set_sink(nullptr);
    log::set_program("ddplaunch");
    log::set_level(log::Level::Info);
  }
};

TEST_CASE("log: lines carry the program prefix and a newline, each line of a message", "[log]") {
  Capture c;
  log::info("started {} workers in {:g} s", 4, 2.5);
  log::info("rank map\nnode 0: ranks 0-3\n");
  REQUIRE(c.lines.size() == 2);
  CHECK(c.lines[0] == "test: started 4 workers in 2.5 s\n");
  CHECK(c.lines[1] == "test: rank map\ntest: node 0: ranks 0-3\n");
}

TEST_CASE("log: messages below the level are dropped", "[log]") {
  Capture c;
  log::debug("hidden");
  log::set_level(log::Level::Warning);
  log::info("hidden");
  log::warning("shown {}", 1);
  log::error("shown {}", 2);
  REQUIRE(c.lines.size() == 2);
  CHECK(c.lines[0] == "test: shown 1\n");
  log::set_level(log::Level::Debug);
  log::debug("now shown");
  CHECK(c.lines.size() == 3);
}

TEST_CASE("log: levels parse in any case, bad values name themselves", "[log]") {
  CHECK(log::parse_level("DEBUG") == log::Level::Debug);
  CHECK(log::parse_level("warn") == log::Level::Warning);
  CHECK(log::parse_level("Error") == log::Level::Error);
  CHECK_THROWS_AS(log::parse_level("loud"), ddp::UsageError);
  CHECK_THROWS_WITH(log::parse_level("loud"), Catch::Contains("'loud'") && Catch::Contains("debug, info"));
}

TEST_CASE("log: DDPLAUNCH_LOG_LEVEL sets the level, a bad one is a usage error naming it", "[log]") {
  Capture c;
  ::setenv("DDPLAUNCH_LOG_LEVEL", "error", 1);
  log::set_level_from_env();
  CHECK(log::level() == log::Level::Error);
  ::setenv("DDPLAUNCH_LOG_LEVEL", "chatty", 1);
  CHECK_THROWS_WITH(log::set_level_from_env(), Catch::Contains("DDPLAUNCH_LOG_LEVEL") && Catch::Contains("chatty"));
  ::unsetenv("DDPLAUNCH_LOG_LEVEL");
}

}  // namespace
