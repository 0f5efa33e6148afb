// See oom_check.hpp.
#include "launcher/report/oom_check.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace ddp::launcher {
namespace {

long long monotonic_us() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

// The whole kernel log buffer, one record per line ("" when /dev/kmsg is not readable).
std::string read_kmsg() {
  const int fd = ::open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return "";
  std::string out;
  char record[8192];
  for (;;) {
    const ssize_t n = ::read(fd, record, sizeof record);
    if (n > 0) {
      out.append(record, static_cast<std::size_t>(n));
      if (out.back() != '\n') out += '\n';
    } else if (n < 0 && (errno == EPIPE || errno == EINTR)) {
      continue;  // a record was overwritten while we read: go on with the next
    } else {
      break;  // EAGAIN: the end of the buffer
    }
  }
  ::close(fd);
  return out;
}

// The file counting OOM kills for our memory cgroup, from /proc/self/cgroup.
std::string counter_file() {
  std::ifstream in("/proc/self/cgroup");
  std::string v2;
  for (std::string line; std::getline(in, line);) {
    const auto colon = line.find(':'), second = line.find(':', colon + 1);
    if (colon == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(colon + 1, second - colon - 1), path = line.substr(second + 1);
    if (controllers == "memory") return "/sys/fs/cgroup/memory" + path + "/memory.oom_control";  // v1
    if (line.rfind("0::", 0) == 0) v2 = path;
  }
  for (const char* root : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
    const std::string file = std::string(root) + v2 + "/memory.events";
    if (::access(file.c_str(), R_OK) == 0) return file;
  }
  return "";
}

// The "oom_kill N" line of a memory.events or memory.oom_control file; -1 when unreadable.
long long read_oom_kills(const std::string& file) {
  std::ifstream in(file);
  for (std::string key; in >> key;) {
    long long value = 0;
    if (!(in >> value)) break;
    if (key == "oom_kill") return value;
  }
  return -1;
}

}  // namespace

std::optional<long long> oom_kill_in_log(const std::string& records, pid_t pid, long long since_us) {
  const std::string needle = fmt::format("Killed process {} (", pid);
  std::optional<long long> found;
  std::istringstream in(records);
  for (std::string line; std::getline(in, line);) {
    const auto at = line.find(needle);
    const auto semi = line.find(';');
    if (at == std::string::npos || semi == std::string::npos || semi > at) continue;
    long long stamp = 0;
    if (std::sscanf(line.c_str(), "%*d,%*d,%lld", &stamp) != 1 || stamp < since_us) continue;
    const auto rss = line.find("anon-rss:", at);
    found = rss == std::string::npos ? -1 : std::atoll(line.c_str() + rss + 9);
  }
  return found;
}

OomWitness::OomWitness() : started_us_(monotonic_us()), counter_file_(counter_file()) {
  if (!counter_file_.empty()) counter_at_start_ = read_oom_kills(counter_file_);
}

std::optional<std::string> OomWitness::explain(pid_t pid) const {
  // A few seconds of slack: the log's clock and ours may differ slightly.
  if (const auto rss_kib = oom_kill_in_log(read_kmsg(), pid, started_us_ - 5000000)) {
    if (*rss_kib < 0) return std::string("killed by the out-of-memory killer (kernel log)");
    return fmt::format("killed by the out-of-memory killer, anon-rss {} MiB at death (kernel log)", *rss_kib / 1024);
  }
  if (counter_file_.empty() || counter_at_start_ < 0) return std::nullopt;
  const long long now = read_oom_kills(counter_file_);
  if (now <= counter_at_start_) return std::nullopt;
  return fmt::format("probably killed by the out-of-memory killer: oom_kill in {} rose by {} during the job",
                     counter_file_, now - counter_at_start_);
}

}  // namespace ddp::launcher
