// The Flight Recorder parses' cost (launcher/watch/fr/recorder.hpp): parse_fr_trace, the full
// parse the hang report reads, against parse_fr_status, the fast one the hang watch runs on every
// poll. Once a test case hidden in tests/launcher/watch/test_flight_recorder.cpp; the unit test
// there keeps what must hold (the fast parse agrees with the full one and takes less time).
//
//   fr_parse [RECORD_JSON]
//       Prints, for each case, "CASE: BYTES bytes, parse_fr_trace F ms, parse_fr_status S ms"
//       (best of 10):
//         named        a record of 2000 entries like torch's (the test fixtures' big_document),
//                      every group named by the newest entries;
//         unnamed      the same with a group that has no entry, so that the fast parse scans
//                      every entry for its name;
//         own record   RECORD_JSON as it is, when given (a dump of one's own job).
// Exit status 1 when a record cannot be read or does not parse.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "launcher/watch/fr/recorder.hpp"
#include "tests/launcher/watch/fr/fixtures.hpp"

namespace {

using ddp::launcher::parse_fr_status;
using ddp::launcher::parse_fr_trace;

bool measure(const char* name, const std::string& doc) {
  using Clock = std::chrono::steady_clock;
  if (!parse_fr_trace(doc).valid || !parse_fr_status(doc).valid) {
    std::fprintf(stderr, "fr_parse: %s: not a Flight Recorder record\n", name);
    return false;
  }
  double full_ms = 1e9, fast_ms = 1e9;
  for (int i = 0; i < 10; ++i) {
    const auto t0 = Clock::now();
    (void)parse_fr_trace(doc);
    const auto t1 = Clock::now();
    (void)parse_fr_status(doc);
    const auto t2 = Clock::now();
    full_ms = std::min(full_ms, std::chrono::duration<double, std::milli>(t1 - t0).count());
    fast_ms = std::min(fast_ms, std::chrono::duration<double, std::milli>(t2 - t1).count());
  }
  std::printf("%s: %zu bytes, parse_fr_trace %.2f ms, parse_fr_status %.3f ms\n", name, doc.size(), full_ms, fast_ms);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2) {
    std::fprintf(stderr, "usage: fr_parse [RECORD_JSON]\n");
    return 2;
  }
  const std::string named = fr_fixtures::big_document(2000);
  std::string unnamed = named;
  unnamed.insert(unnamed.find("\"pg_status\":{") + 13, "\"9\":{\"last_completed_collective\":\"-1\"},");
  bool ok = measure("named", named) && measure("unnamed", unnamed);
  if (argc == 2) {
    std::ifstream in(argv[1]);
    if (!in) {
      std::fprintf(stderr, "fr_parse: cannot read %s\n", argv[1]);
      return 1;
    }
    ok = ok && measure("own record", std::string(std::istreambuf_iterator<char>(in), {}));
  }
  return ok ? 0 : 1;
}
