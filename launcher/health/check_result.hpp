// What one health check found (health/node_health.hpp runs them before every round). Plain data.
#pragma once

#include <string>
#include <vector>

namespace ddp::launcher {

struct CheckResult {
  enum class Verdict { Healthy, Skipped, Failed };
  std::string name;  // "log directory", "program", "GPUs", "command 'CMD'"
  Verdict verdict = Verdict::Healthy;
  std::string summary;              // one line: "9.8 GiB free in /tmp", "no GPU: skipped", why it failed
  std::vector<std::string> output;  // a command's last lines of output (bounded), else empty

  bool failed() const { return verdict == Verdict::Failed; }
};

}  // namespace ddp::launcher
