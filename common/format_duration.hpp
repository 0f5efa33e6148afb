// Durations in messages, written once. Every message that shows seconds goes through one of these,
// so the same value reads the same way and the unit is always " s" after a space. Three forms, by
// what the number is:
//   format_seconds        a setting or a bound ("--rdzv_timeout=900 s", "SIGKILL after 0.5 s"):
//                         the shortest form, fmt's {:g} (six significant digits, no trailing zeros).
//   format_seconds_fixed  a measured time, to a fixed number of decimals ("exit 0 in 0.03 s").
//   format_whole_seconds  whole seconds, as an integer however large ("started 86400 s ago").
// Pure; never throw (but std::bad_alloc).
#pragma once

#include <chrono>
#include <string>

namespace ddp {

// "30 s", "0.1 s", "2.5 s". Any std::chrono duration converts implicitly.
std::string format_seconds(std::chrono::duration<double> d);

// "12.3 s" for decimals 1, "0.03 s" for decimals 2.
std::string format_seconds_fixed(std::chrono::duration<double> d, int decimals);

// "120 s". A finer duration must be truncated by the caller (std::chrono::duration_cast).
std::string format_whole_seconds(std::chrono::seconds d);

}  // namespace ddp
