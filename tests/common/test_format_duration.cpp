// Durations in messages: each form gives the text the messages gave before it was written once
// (fmt's {:g}, {:.Nf} and {} of the seconds), so no message changed.
#include "common/format_duration.hpp"

#include <catch2/catch.hpp>

using namespace std::chrono_literals;

TEST_CASE("format_seconds is the shortest form of a setting", "[format_duration]") {
  CHECK(ddp::format_seconds(30s) == "30 s");
  CHECK(ddp::format_seconds(900'000ms) == "900 s");
  CHECK(ddp::format_seconds(100ms) == "0.1 s");
  CHECK(ddp::format_seconds(2500ms) == "2.5 s");
  CHECK(ddp::format_seconds(0ms) == "0 s");
  CHECK(ddp::format_seconds(-1500ms) == "-1.5 s");
  CHECK(ddp::format_seconds(1234567ms) == "1234.57 s");  // six significant digits, as {:g}
  CHECK(ddp::format_seconds(std::chrono::duration<double>(1e7)) == "1e+07 s");
}

TEST_CASE("format_seconds_fixed keeps the decimals of a measured time", "[format_duration]") {
  CHECK(ddp::format_seconds_fixed(30ms, 2) == "0.03 s");
  CHECK(ddp::format_seconds_fixed(12345ms, 1) == "12.3 s");
  CHECK(ddp::format_seconds_fixed(2s, 1) == "2.0 s");
  CHECK(ddp::format_seconds_fixed(std::chrono::nanoseconds(1'250'000'000), 2) == "1.25 s");
}

TEST_CASE("format_whole_seconds is an integer however large", "[format_duration]") {
  CHECK(ddp::format_whole_seconds(120s) == "120 s");
  CHECK(ddp::format_whole_seconds(std::chrono::duration_cast<std::chrono::seconds>(1999ms)) == "1 s");
  CHECK(ddp::format_whole_seconds(std::chrono::hours(24 * 30)) == "2592000 s");
}
