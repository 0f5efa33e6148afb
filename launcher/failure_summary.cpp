// Failure summary text; see failure_summary.hpp.
#include "launcher/failure_summary.hpp"

#include <algorithm>
#include <ctime>
#include <fstream>
#include <sstream>

#include "common/signals.hpp"

namespace ddp::launcher {

namespace {
std::string now_text() {
  const std::time_t t = std::time(nullptr);
  std::tm local{};
  ::localtime_r(&t, &local);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d_%H:%M:%S", &local);
  return buf;
}
}  // namespace

std::string describe_failure(const WorkerResult& w, const FailureContext& c) {
  std::ostringstream out;
  const std::string bar(60, '=');
  out << bar << "\n" << c.program << " FAILED\n" << std::string(60, '-') << "\n";
  out << "  time      : " << now_text() << "\n";
  out << "  host      : " << c.host << "\n";
  out << "  node rank : " << c.node_rank << "\n";
  out << "  rank      : " << w.rank << " (local_rank: " << w.local_rank << ")\n";
  out << "  exitcode  : " << w.exit_code;
  if (w.term_signal) out << " (died of " << signal_name(w.term_signal) << ")";
  out << " (pid: " << w.pid << ")\n";
  std::string error_file = "<N/A>";
  if (!w.error_file.empty()) {
    std::ifstream in(w.error_file);
    if (in) {
      std::stringstream content;
      content << in.rdbuf();
      error_file = w.error_file + "\n" + content.str();
    }
  }
  out << "  error_file: " << error_file << "\n";
  if (!w.stderr_tail.empty()) {
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
  out << bar;
  return out.str();
}

}  // namespace ddp::launcher
