// See proc_stat.hpp.
#include "launcher/watch/probe/proc_stat.hpp"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace ddp::launcher {

ProcStat read_proc_stat(int pid) {
  ProcStat s;
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string line;
  if (!std::getline(in, line)) return s;
  const std::size_t close = line.rfind(')');  // the command may hold spaces and parentheses
  if (close == std::string::npos || close + 2 >= line.size()) return s;
  s.state = line[close + 2];
  std::istringstream rest(line.substr(close + 2));
  std::vector<std::string> f;
  for (std::string x; rest >> x && f.size() < 13;) f.push_back(x);
  if (f.size() < 13) return s;
  // Fields 14 and 15 of proc(5) (utime, stime) are 11 and 12 after the state (field 3).
  try {
    s.cpu_ticks = std::stoll(f[11]) + std::stoll(f[12]);
  } catch (const std::exception&) {
    s.cpu_ticks = -1;
  }
  return s;
}

const char* describe_state(char state) {
  switch (state) {
    case 'R':
      return "running";
    case 'S':
      return "sleeping (waiting for an event)";
    case 'D':
      return "in uninterruptible I/O";
    case 'T':
      return "stopped (SIGSTOP or a job-control signal)";
    case 't':
      return "stopped by a debugger";
    case 'Z':
    case 0:
      return "exited";
    default:
      return "in an unknown state";
  }
}

}  // namespace ddp::launcher
