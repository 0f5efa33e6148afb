// Times as the watch reports print them, written once for the collective-hang report
// (watch/collective_hang.hpp) and the Flight Recorder's (watch/fr/analysis.hpp). Pure; never throw.
#pragma once

#include <cstdint>
#include <string>

namespace ddp::launcher {

// The time from one CLOCK_REALTIME ns time to a later one, to a tenth of a second: "12.3 s"
// (negative if it is earlier; format_seconds_fixed in common/format_duration.hpp).
std::string time_between(std::int64_t earlier_ns, std::int64_t later_ns);

// "09:41:02.123 UTC" for a CLOCK_REALTIME ns time.
std::string clock_time(std::int64_t ns);

}  // namespace ddp::launcher
