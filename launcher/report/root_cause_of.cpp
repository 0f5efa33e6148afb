// See root_cause_of.hpp.
#include "launcher/report/root_cause_of.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

namespace ddp::launcher {

RootCause worker_root_cause(const RankOutcome& o, int node, const std::string& host) {
  const WorkerResult& w = o.worker;
  RootCause c;
  c.kind = RootCause::Kind::Worker;
  c.node = node;
  c.host = host;
  c.time = o.failed_at();
  c.rank = w.rank;
  c.local_rank = w.local_rank;
  c.pid = w.pid;
  c.exit_code = w.exit_code;
  c.signal = w.term_signal;
  c.note = o.death_note;
  if (o.record) {
    c.error = o.record->message;
    c.error_type = error_type_of(o.record->message);
    c.traceback = o.record->traceback;
    c.error_file = w.error_file;
    c.error_problem = o.record->problem;
  }
  c.stderr_tail = w.stderr_tail;
  c.stderr_quiet = w.stderr_quiet;
  c.collective_timeout = timed_out_in_collective(o);
  return c;
}

RootCause worker_root_cause(const RoundReport& report, int node, const std::string& host) {
  RootCause c = worker_root_cause(*report.root_cause(), node, host);
  if (c.collective_timeout) c.collective = report.collective_record();
  return c;
}

RootCause node_root_cause(RootCause::Kind kind, int node, const std::string& host, std::string reason) {
  RootCause c;
  c.kind = kind;
  c.node = node;
  c.host = host;
  c.time = std::chrono::system_clock::now();
  c.reason = std::move(reason);
  return c;
}

std::chrono::system_clock::time_point began_at(const RootCause& c) {
  const bool silence_known = c.kind == RootCause::Kind::NodeLost && c.silent_since.time_since_epoch().count() > 0;
  return silence_known ? std::min(c.silent_since, c.time) : c.time;
}

bool began_before(const RootCause& stop, std::chrono::system_clock::time_point failed_at) {
  if (stop.kind == RootCause::Kind::Worker || stop.kind == RootCause::Kind::Reported) return false;
  return began_at(stop) < failed_at;
}

}  // namespace ddp::launcher
