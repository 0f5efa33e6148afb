// A job cgroup for one test, named after the test process and a tag, or nullopt (with a Catch2
// warning naming the reason) where cgroup v2 is not writable: such a test skips itself.
#pragma once

#include <unistd.h>

#include <optional>
#include <string>

#include <catch2/catch.hpp>

#include "common/job_cgroup.hpp"

namespace ddp::testing {

inline std::optional<JobCgroup> test_cgroup(const std::string& tag) {
  std::string why;
  auto cgroup = JobCgroup::create("ddplaunch-test-" + std::to_string(::getpid()) + "-" + tag, &why);
  if (!cgroup) WARN("skipped: no writable cgroup v2 here (" << why << ")");
  return cgroup;
}

}  // namespace ddp::testing
