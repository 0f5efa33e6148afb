// The failure-detection budget (launcher/config/failure_budget.hpp): the settings one budget
// gives, the timeouts the workers see from their environment, the worst case per failure class,
// the one-line warnings for timeouts that do not nest, and the printed table.
#include "launcher/config/failure_budget.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

namespace {

using namespace ddp::launcher;
using namespace std::chrono_literals;

bool has_line(const std::vector<std::string>& lines, const std::string& text) {
  return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return l.find(text) != std::string::npos; });
}

const FailureClass& failure(const std::vector<FailureClass>& classes, const std::string& name) {
  return *std::find_if(classes.begin(), classes.end(), [&](const FailureClass& f) { return f.name == name; });
}

}  // namespace

TEST_CASE("torch's defaults and ddplaunch's nest: no warning, and a hang is the collective timeout") {
  const TimeoutsInForce t = timeouts_in_force(LaunchConfig{}, {});
  CHECK(t.collective == 600s);
  CHECK(t.nccl_heartbeat == 1800s);
  CHECK(t.nccl_heartbeat_source == "torch's default");
  CHECK(nesting_warnings(t).empty());
  const auto classes = detection_times(t);
  CHECK(failure(classes, "crash").worst == 30s);
  CHECK(failure(classes, "hang").worst == 630s);
  CHECK(failure(classes, "lost node").worst == 40s);
  CHECK(failure(classes, "sick node").worst == 1800s + 30s + 30s);
}

TEST_CASE("the workers' environment sets the NCCL heartbeat, or turns its monitor off") {
  SECTION("a value") {
    const TimeoutsInForce t = timeouts_in_force(LaunchConfig{}, {{"TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", "300"}});
    CHECK(t.nccl_heartbeat == 300s);
    CHECK(t.nccl_heartbeat_source == "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC=300");
  }
  SECTION("not a number: torch's default, said") {
    const TimeoutsInForce t = timeouts_in_force(LaunchConfig{}, {{"TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", "5m"}});
    CHECK(t.nccl_heartbeat == 1800s);
    CHECK_THAT(t.nccl_heartbeat_source, Catch::Contains("is not a whole number of seconds"));
  }
  SECTION("the monitor off: a sick node is never detected without --hang_timeout") {
    const TimeoutsInForce t = timeouts_in_force(LaunchConfig{}, {{"TORCH_NCCL_ENABLE_MONITORING", "0"}});
    CHECK(t.nccl_heartbeat == 0s);
    CHECK_FALSE(failure(detection_times(t), "sick node").detected);
    CHECK(has_line(describe_timeouts(t), "sick node              never"));
  }
}

TEST_CASE("one line for each pair that does not nest") {
  LaunchConfig c;
  SECTION("a hang timeout not shorter than the collective timeout") {
    c.hang_timeout = 900s;
    const auto w = nesting_warnings(timeouts_in_force(c, {}));
    REQUIRE(w.size() == 1);
    CHECK(w[0] ==
          "timeouts do not nest: --hang_timeout=900 s is not shorter than the collective timeout (600 s, torch's "
          "default), so the workers' watchdog ends a hang before the launcher can name the rank; use a --hang_timeout "
          "below 600 s");
    CHECK(failure(detection_times(timeouts_in_force(c, {})), "hang").worst == 630s);
  }
  SECTION("a hang timeout shorter than a checkpoint's pause") {
    c.hang_timeout = 20s;
    c.preemption_grace = 120s;
    const auto w = nesting_warnings(timeouts_in_force(c, {}));
    REQUIRE(w.size() == 1);
    CHECK_THAT(w[0], Catch::StartsWith("timeouts do not nest: --hang_timeout=20 s is not longer than "
                                       "--preemption_grace=120 s, the time a checkpoint is given"));
  }
  SECTION("a wedged watchdog: whichever of --hang_timeout and NCCL's heartbeat comes first") {
    c.hang_timeout = 2000s;
    CHECK(failure(detection_times(timeouts_in_force(c, {})), "sick node").worst == 1800s + 30s + 30s);
    c.hang_timeout = 500s;
    CHECK(failure(detection_times(timeouts_in_force(c, {})), "sick node").worst == 500s + 30s + 30s);
  }
  SECTION("a node heartbeat longer than the collective timeout") {
    c.heartbeat_timeout = 900s;
    const auto w = nesting_warnings(timeouts_in_force(c, {}));
    REQUIRE(w.size() == 1);
    CHECK_THAT(w[0], Catch::Contains("--heartbeat_timeout=900 s is not shorter than the collective timeout (600 s)"));
  }
  SECTION("a value set alone that breaks the budget") {
    c.failure_budget = 300s;
    const BudgetSettings b = settings_for_budget(c.failure_budget);
    c.hang_timeout = 400s;  // given alone: wins over the budget's 150 s
    c.heartbeat_timeout = b.heartbeat_timeout;
    c.shutdown_timeout = b.shutdown_timeout;
    c.unkillable_timeout = b.unkillable_timeout;
    const auto w = nesting_warnings(timeouts_in_force(c, {}));
    CHECK(has_line(w, "a hang can take 430 s to detect and stop, over --failure_budget=300 s"));
    CHECK(has_line(w, "a sick node can take 460 s"));
    CHECK(w.size() == 2);
  }
}

TEST_CASE("a budget gives timeouts that nest, each failure class within it") {
  for (const auto budget : {60s, 300s, 1200s, 7200s}) {
    CAPTURE(budget.count());
    const BudgetSettings b = settings_for_budget(budget);
    LaunchConfig c;
    c.failure_budget = budget;
    c.hang_timeout = b.hang_timeout;
    c.heartbeat_timeout = b.heartbeat_timeout;
    c.shutdown_timeout = b.shutdown_timeout;
    c.unkillable_timeout = b.unkillable_timeout;
    c.preemption_grace = std::min<std::chrono::milliseconds>(30s, b.hang_timeout - 1s);
    const TimeoutsInForce t =
        timeouts_in_force(c, {{"TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", std::to_string(b.nccl_heartbeat_s)}});
    CHECK(b.hang_timeout < t.collective);
    CHECK(nesting_warnings(t).empty());
    for (const FailureClass& f : detection_times(t)) CHECK(f.worst <= budget);
  }
  const BudgetSettings b = settings_for_budget(300s);
  CHECK(b.hang_timeout == 150s);
  CHECK(b.heartbeat_timeout == 30s);
  CHECK(b.shutdown_timeout == 30s);
  CHECK(b.unkillable_timeout == 30s);
  CHECK(b.nccl_heartbeat_s == 300);
}

TEST_CASE("the table names every timeout, the worst case per class and when the job gives up") {
  LaunchConfig c;
  c.hang_timeout = 120s;
  c.max_restarts = 3;
  const std::vector<std::string> lines = describe_timeouts(timeouts_in_force(c, {}));
  const std::vector<std::string> expected = {
      "timeouts in force:",
      "  collective timeout     600 s    torch's default for NCCL (a script's init_process_group(timeout=) overrides it)",
      "  NCCL heartbeat         1800 s   torch's default",
      "  --hang_timeout         120 s",
      "  --heartbeat_timeout    10 s     a beat every 1 s",
      "  --rdzv_timeout         900 s    last call 3 s",
      "  --shutdown_timeout     30 s     SIGTERM to SIGKILL after a failure",
      "  --preemption_grace     30 s     SIGTERM to SIGKILL after a preemption",
      "  --unkillable_timeout   30 s     after SIGKILL, then the host is out (exit 71)",
      "  --max_restarts         3",
      "worst case to detect a failure and stop the round:",
      "  crash                  30 s     at once (the worker's exit), then --shutdown_timeout for the others to stop",
      "  hang                   150 s    --hang_timeout (the launcher names the rank that never entered the "
      "collective), then --shutdown_timeout",
      "  lost node              40 s     --heartbeat_timeout, then --shutdown_timeout",
      "  sick node              180 s    --hang_timeout, --shutdown_timeout, --unkillable_timeout if the kernel holds "
      "a worker; the health checks keep it out of the next round",
      "the job gives up after at most 600 s (4 round(s) of at most 150 s each, plus a rendezvous per restart)",
  };
  CHECK(lines == expected);
}
