// torchrun's environment knobs read directly (launcher/cli/torchrun_env.hpp): the SIGTERM grace
// from --shutdown_timeout or TORCH_ELASTIC_SHUTDOWN_TIMEOUT, and LOGLEVEL's names. What
// apply_torchrun_knobs does with a whole command line: test_torchrun_knobs.cpp.
#include "launcher/cli/torchrun_env.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "ddplaunch/common/error.hpp"

using Catch::Matchers::Contains;
using ddp::Environment;
using ddp::map_env;
using ddp::launcher::level_from_loglevel;
using ddp::launcher::exit_barrier_timeout_from;
using ddp::launcher::shutdown_timeout_from;
using namespace std::chrono_literals;

TEST_CASE("torchrun env: the grace is the flag, else TORCH_ELASTIC_SHUTDOWN_TIMEOUT, else 30 s", "[cli]") {
  const Environment torch_env{{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "2.5"}};
  CHECK(shutdown_timeout_from("", map_env({})) == 30s);
  CHECK(shutdown_timeout_from("", map_env(torch_env)) == 2500ms);
  CHECK(shutdown_timeout_from("5", map_env(torch_env)) == 5s);
  CHECK(shutdown_timeout_from("0", map_env({})) == 0ms);
  CHECK_THROWS_WITH(
      shutdown_timeout_from("", map_env(Environment{{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "soon"}})),
      Contains("TORCH_ELASTIC_SHUTDOWN_TIMEOUT=soon is not a number of seconds") && Contains("fix it or unset it"));
}

TEST_CASE("torchrun env: the exit barrier is the flag, else TORCH_ELASTIC_EXIT_BARRIER_TIMEOUT, else 300 s",
          "[cli]") {
  const Environment torch_env{{"TORCH_ELASTIC_EXIT_BARRIER_TIMEOUT", "42"}};
  CHECK(exit_barrier_timeout_from("", map_env({})) == 300s);
  CHECK(exit_barrier_timeout_from("", map_env(torch_env)) == 42s);
  CHECK(exit_barrier_timeout_from("7.5", map_env(torch_env)) == 7500ms);
  CHECK_THROWS_WITH(exit_barrier_timeout_from("", map_env(Environment{{"TORCH_ELASTIC_EXIT_BARRIER_TIMEOUT", "x"}})),
                    Contains("TORCH_ELASTIC_EXIT_BARRIER_TIMEOUT=x is not a number of seconds"));
}

TEST_CASE("torchrun env: LOGLEVEL's Python names in any case, and the others refused", "[cli]") {
  CHECK(level_from_loglevel("DEBUG") == "debug");
  CHECK(level_from_loglevel("notset") == "debug");
  CHECK(level_from_loglevel("Info") == "info");
  CHECK(level_from_loglevel("WARN") == "warning");
  CHECK(level_from_loglevel("warning") == "warning");
  for (const char* name : {"ERROR", "critical", "Fatal"}) CHECK(level_from_loglevel(name) == "error");
  CHECK_THROWS_AS(level_from_loglevel(""), ddp::UsageError);
  CHECK_THROWS_WITH(level_from_loglevel("verbose"), Contains("LOGLEVEL=verbose is not a level torchrun knows") &&
                                                        Contains("DEBUG, INFO, WARNING, ERROR or CRITICAL"));
}
