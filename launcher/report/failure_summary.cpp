// Failure summary text; see failure_summary.hpp.
#include "launcher/report/failure_summary.hpp"

#include <algorithm>
#include <ctime>
#include <sstream>

#include "common/signals.hpp"
#include "launcher/report/error_file.hpp"
#include "launcher/rdzv/outcome.hpp"

namespace ddp::launcher {

std::string time_text(std::chrono::system_clock::time_point time) {
  const std::time_t t = std::chrono::system_clock::to_time_t(time);
  std::tm local{};
  ::localtime_r(&t, &local);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d_%H:%M:%S", &local);
  return buf;
}

std::string describe_failure(const WorkerResult& w, const FailureContext& c) {
  std::ostringstream out;
  const std::string bar(60, '=');
  out << bar << "\n" << c.program << " FAILED\n" << std::string(60, '-') << "\n";
  if (!c.heading.empty()) out << c.heading << "\n";
  const auto when = c.time == std::chrono::system_clock::time_point{} ? std::chrono::system_clock::now() : c.time;
  out << "  time      : " << time_text(when) << "\n";
  out << "  host      : " << c.host << "\n";
  out << "  node rank : " << c.node_rank << "\n";
  out << "  rank      : " << w.rank << " (local_rank: " << w.local_rank << ")\n";
  out << "  exitcode  : " << w.exit_code;
  if (w.term_signal) {
    out << " (died of " << signal_name(w.term_signal) << (c.death_note.empty() ? "" : ": " + c.death_note) << ")";
  }
  out << " (pid: " << w.pid << ")\n";
  // The worker's own record of its exception (@record), else its last stderr lines.
  const std::optional<ErrorRecord> record = read_error_file(w.error_file);
  if (record && !record->message.empty()) out << "  error     : " << printable(record->message) << "\n";
  if (record && !record->traceback.empty()) {
    out << "  traceback :\n";
    std::istringstream lines(printable(record->traceback));
    for (std::string line; std::getline(lines, line);) out << "    " << line << "\n";
  }
  if (record && !record->problem.empty())
    out << "  error_file: " << w.error_file << ": " << record->problem << "\n";
  else
    out << "  error_file: " << (record ? w.error_file : "<N/A> (the worker wrote none: use @record on its main)")
        << "\n";
  const bool explained = record && !record->message.empty();
  if (!w.stderr_tail.empty() && !explained) {
    out << "  last stderr lines:\n";
    for (const auto& line : w.stderr_tail) out << "    " << line << "\n";
  }
  const bool module_missing = std::any_of(w.stderr_tail.begin(), w.stderr_tail.end(), [](const std::string& line) {
    return line.find("ModuleNotFoundError") != std::string::npos;
  });
  if (module_missing && !c.python.path.empty()) {
    out << "  hint      : the worker ran " << c.python.path << " (" << c.python.reason
        << "); install the module for that interpreter, or choose another with PYTHON_EXEC\n";
  }
  out << c.appendix << bar;
  return out.str();
}

}  // namespace ddp::launcher
