// See report_time.hpp.
#include "launcher/watch/probe/report_time.hpp"

#include <ctime>

#include <fmt/format.h>

#include "common/format_duration.hpp"

namespace ddp::launcher {

std::string time_between(std::int64_t earlier_ns, std::int64_t later_ns) {
  return format_seconds_fixed(std::chrono::duration<double>(static_cast<double>(later_ns - earlier_ns) / 1e9), 1);
}

std::string clock_time(std::int64_t ns) {
  const std::time_t t = static_cast<std::time_t>(ns / 1000000000);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  return fmt::format("{:02}:{:02}:{:02}.{:03} UTC", tm.tm_hour, tm.tm_min, tm.tm_sec, (ns / 1000000) % 1000);
}

}  // namespace ddp::launcher
