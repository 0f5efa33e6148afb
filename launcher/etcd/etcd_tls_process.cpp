// See etcd_tls_process.hpp.
#include "launcher/etcd/etcd_tls_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "common/child_process.hpp"
#include "common/exit_codes.hpp"
#include "ddplaunch/common/env_lookup.hpp"
#include "launcher/config/flag_parsers.hpp"
#include "launcher/config/python_interpreter.hpp"

namespace ddp::launcher {
namespace {
constexpr const char* kPortsLine = "ddplaunch-etcd-tls: ports ";
constexpr int kStartTimeoutMs = 10000;

// Reads the proxy's first line (up to the timeout); "" when it ended or stayed silent.
std::string first_line(int fd) {
  std::string line;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kStartTimeoutMs);
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return "";
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return "";
    char buffer[256];
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return "";
    line.append(buffer, static_cast<std::size_t>(n));
    if (const auto end = line.find('\n'); end != std::string::npos) return line.substr(0, end);
  }
}
}  // namespace

std::vector<std::string> start_etcd_tls_proxy(const LaunchConfig& c) {
  TlsProxyStart start;
  start.members = c.etcd_endpoints;
  start.ca_file = c.etcd_ca_file;
  start.cert_file = c.etcd_cert_file;
  start.key_file = c.etcd_key_file;
  return start_tls_proxy(start);
}

std::vector<std::string> start_tls_proxy(const TlsProxyStart& s) {
  const std::string exe = (std::filesystem::path(own_executable()).parent_path() / "ddplaunch-etcd-tls").string();
  if (::access(exe.c_str(), X_OK) != 0) {
    throw UsageError(fmt::format(
        "{} needs ddplaunch-etcd-tls beside ddplaunch, and {} is not there; install ddplaunch again (pip "
        "install, or build the ddplaunch-etcd-tls target)",
        s.purpose, exe));
  }
  std::vector<std::string> argv{exe};
  if (!s.ca_file.empty()) argv.insert(argv.end(), {"--cacert", s.ca_file});
  if (!s.cert_file.empty()) argv.insert(argv.end(), {"--cert", s.cert_file, "--key", s.key_file});
  argv.insert(argv.end(), s.members.begin(), s.members.end());
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) throw Error(fmt::format("pipe for ddplaunch-etcd-tls: {}", std::strerror(errno)));
  ChildOptions o;
  o.exe = exe;
  o.argv = argv;
  o.env = current_environment();
  o.stdout_fd = out[1];
  pid_t pid = -1;
  try {
    pid = start_child(o);
  } catch (...) {
    ::close(out[0]);
    ::close(out[1]);
    throw;
  }
  ::close(out[1]);
  const std::string line = first_line(out[0]);
  ::close(out[0]);
  if (line.rfind(kPortsLine, 0) != 0) {
    // It ended (its output closed) or stayed silent: a SIGKILL makes sure, and the status says which.
    ::kill(pid, SIGKILL);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == kExitUsage) {
      throw UsageError(fmt::format("the TLS proxy ({}: ddplaunch-etcd-tls) refused its files: see its message above",
                                   s.purpose));
    }
    throw Error(fmt::format("the TLS proxy ({}: ddplaunch-etcd-tls) did not start: see its message above", s.purpose));
  }
  std::vector<std::string> endpoints;
  for (const std::string& port : split_list(line.substr(std::string(kPortsLine).size()))) {
    endpoints.push_back("127.0.0.1:" + port);
  }
  return endpoints;
}

}  // namespace ddp::launcher
