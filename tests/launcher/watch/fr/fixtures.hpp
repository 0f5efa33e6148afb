// The Flight Recorder fixtures (fixtures/capture_fr.py, real torch 2.15 gloo runs), read for the
// tests of launcher/watch/fr/: recorder.hpp, analysis.hpp and codec.hpp, and for bench/fr_parse.
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "launcher/watch/fr/analysis.hpp"

namespace fr_fixtures {

inline std::string read(const std::string& name) {
  std::ifstream in(std::string(DDP_FR_FIXTURES) + "/" + name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A record of `n` entries like torch's: hang2.r0.json's first entry again and again.
inline std::string big_document(int n) {
  const std::string doc = read("hang2.r0.json");
  const std::size_t open = doc.find("\"entries\":[") + 11;
  const std::size_t close = doc.find("},{", open) + 1;
  const std::string entry = doc.substr(open, close - open);
  std::string entries;
  for (int i = 0; i < n; ++i) entries += (i ? "," : "") + entry;
  const std::size_t end = doc.find("],\"nccl_comm_state\"");
  return doc.substr(0, open) + entries + doc.substr(end);
}

// Every rank of a scenario as the analysis takes it, all on node 0 of host "vm", pid 100 + rank,
// the snapshots taken `settle_s` after the newest entry any rank recorded (capture_fr.py waits 5 s).
inline std::vector<ddp::launcher::RankFr> ranks(const std::string& scenario, int world, double settle_s = 5) {
  std::vector<ddp::launcher::RankFr> out;
  std::int64_t newest = 0;
  for (int r = 0; r < world; ++r) {
    ddp::launcher::RankFr fr;
    fr.rank = r;
    fr.host = "vm";
    fr.pid = 100 + r;
    fr.reachable = true;
    fr.fr = ddp::launcher::parse_fr_trace(read(scenario + ".r" + std::to_string(r) + ".json"));
    fr.traceback = read(scenario + ".r" + std::to_string(r) + ".traceback.txt");
    for (const auto& e : fr.fr.entries) newest = std::max(newest, e.created_ns);
    out.push_back(std::move(fr));
  }
  for (auto& fr : out) fr.taken_ns = newest + static_cast<std::int64_t>(settle_s * 1e9);
  return out;
}

}  // namespace fr_fixtures
