// The Flight Recorder parses' cost (launcher/watch/flight_recorder.hpp): parse_fr_trace, the full
// parse the hang report reads, against parse_fr_status, the fast one the hang watch runs on every
// poll. Once a test case hidden in tests/launcher/watch/test_flight_recorder.cpp; the unit test
// there keeps what must hold (the fast parse agrees with the full one and takes less time).
//
//   fr_parse FIXTURE_JSON [RECORD_JSON]
//       Builds a record of 2000 entries like torch's from FIXTURE_JSON (its first entry again and
//       again; tests/launcher/watch/fixtures/hang2.r0.json is a real torch 2.15 gloo record) and
//       prints, for each case, "CASE: BYTES bytes, parse_fr_trace F ms, parse_fr_status S ms"
//       (best of 10):
//         named        every group named by the newest entries;
//         unnamed      a group with no entry, so the fast parse scans every entry for its name;
//         own record   RECORD_JSON as it is, when given (a dump of one's own job).
// Exit status 1 when a file cannot be read or a record does not parse.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "launcher/watch/flight_recorder.hpp"

namespace {

using ddp::launcher::parse_fr_status;
using ddp::launcher::parse_fr_trace;

bool read_file(const char* path, std::string& out) {
  std::ifstream in(path);
  if (!in) return false;
  out.assign(std::istreambuf_iterator<char>(in), {});
  return true;
}

// A document of `n` entries like torch's: the fixture's first entry again and again.
std::string big_document(const std::string& doc, int n) {
  const std::size_t open = doc.find("\"entries\":[") + 11;
  const std::size_t close = doc.find("},{", open) + 1;
  const std::string entry = doc.substr(open, close - open);
  std::string entries;
  for (int i = 0; i < n; ++i) entries += (i ? "," : "") + entry;
  const std::size_t end = doc.find("],\"nccl_comm_state\"");
  return doc.substr(0, open) + entries + doc.substr(end);
}

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
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: fr_parse FIXTURE_JSON [RECORD_JSON]\n");
    return 2;
  }
  std::string fixture;
  if (!read_file(argv[1], fixture) || fixture.find("\"entries\":[") == std::string::npos ||
      fixture.find("],\"nccl_comm_state\"") == std::string::npos) {
    std::fprintf(stderr, "fr_parse: cannot read a record with entries from %s\n", argv[1]);
    return 1;
  }
  const std::string named = big_document(fixture, 2000);
  std::string unnamed = named;
  unnamed.insert(unnamed.find("\"pg_status\":{") + 13, "\"9\":{\"last_completed_collective\":\"-1\"},");
  bool ok = measure("named", named) && measure("unnamed", unnamed);
  if (argc == 3) {
    std::string own;
    if (!read_file(argv[2], own)) {
      std::fprintf(stderr, "fr_parse: cannot read %s\n", argv[2]);
      return 1;
    }
    ok = ok && measure("own record", own);
  }
  return ok ? 0 : 1;
}
