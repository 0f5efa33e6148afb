// See control_channel.hpp.
#include "launcher/fleet/control_channel.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "common/log.hpp"
#include "ddplaunch/common/error.hpp"
#include "launcher/config/private_env.hpp"

namespace ddp::launcher {
namespace {

constexpr std::size_t kMaxHeaderBytes = 1 << 20;
constexpr const char* kMagic = "ddplaunch-fleet 1";

std::string escape(const std::string& value) {
  std::string out;
  for (const char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string unescape(const std::string& value) {
  std::string out;
  for (std::size_t i = 0; i < value.size(); ++i) {
    if (value[i] == '\\' && i + 1 < value.size()) {
      out += value[i + 1] == 'n' ? '\n' : value[i + 1];
      ++i;
    } else {
      out += value[i];
    }
  }
  return out;
}

// One line from `fd` without its '\n'; false at end of input. Reads byte by byte so that
// nothing past the line is taken from the channel. Throws ddp::Error on a read error.
bool read_line(int fd, std::string& line, std::size_t& budget) {
  line.clear();
  for (;;) {
    char c = 0;
    const ssize_t n = ::read(fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(fmt::format("reading the controller's channel: {}", std::strerror(errno)));
    if (n == 0) return false;
    if (budget-- == 0) throw Error("the controller's header is longer than 1 MiB");
    if (c == '\n') return true;
    line += c;
  }
}

}  // namespace

std::string encode_controller_header(const ControllerHeader& h) {
  std::string out = fmt::format("{}\nhost {}\nsecret {}\n", kMagic, h.host, h.secret);
  for (const auto& [name, value] : h.env) out += fmt::format("env {}={}\n", name, escape(value));
  return out + "end\n";
}

std::string control_signal_line(int signo) { return signo == SIGINT ? "signal INT\n" : "signal TERM\n"; }

ControllerHeader read_controller_header(int fd) {
  ControllerHeader h;
  std::size_t budget = kMaxHeaderBytes;
  std::string line;
  const auto ended = [] {
    return Error("--fleet_stdin: the input ended before the controller's header did; this flag is for ddplaunch "
                 "--hostfile's own use over ssh");
  };
  if (!read_line(fd, line, budget)) throw ended();
  if (line != kMagic) {
    throw Error(fmt::format("--fleet_stdin: the input starts with '{}', not '{}'; the controller's ddplaunch is "
                            "another version: install the same one on every host",
                            line.substr(0, 40), kMagic));
  }
  for (;;) {
    if (!read_line(fd, line, budget)) throw ended();
    if (line == "end") return h;
    if (line.rfind("secret ", 0) == 0) {
      h.secret = line.substr(7);
    } else if (line.rfind("host ", 0) == 0) {
      h.host = line.substr(5);
    } else if (const auto eq = line.find('='); line.rfind("env ", 0) == 0 && eq != std::string::npos && eq > 4) {
      h.env[line.substr(4, eq - 4)] = unescape(line.substr(eq + 1));
    } else {
      throw Error(fmt::format("--fleet_stdin: malformed header line '{}'", line.substr(0, 60)));
    }
  }
}

int adopt_controller_header(const ControllerHeader& h, int fd) {
  if (!h.host.empty()) log::set_program("ddplaunch@" + h.host);
  for (const auto& [name, value] : h.env) ::setenv(name.c_str(), value.c_str(), 1);
  if (!h.secret.empty()) ::setenv(kSecretEnv, h.secret.c_str(), 1);
  const int control = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (control < 0) throw Error(fmt::format("--fleet_stdin: dup of the channel: {}", std::strerror(errno)));
  const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null < 0 || ::dup2(null, fd) < 0) {
    throw Error(fmt::format("--fleet_stdin: /dev/null as stdin: {}", std::strerror(errno)));
  }
  ::close(null);
  return control;
}

void watch_controller(int control_fd) {
  std::thread([control_fd] {
    std::string line;
    std::size_t budget = static_cast<std::size_t>(-1);
    try {
      while (read_line(control_fd, line, budget)) {
        if (line == "signal INT") ::kill(::getpid(), SIGINT);
        else if (line == "signal TERM") ::kill(::getpid(), SIGTERM);
      }
      log::warning("the controller's ssh connection is gone (end of its channel); stopping this node's job");
    } catch (const Error& e) {
      log::warning("{}; stopping this node's job", e.what());
    }
    ::kill(::getpid(), SIGTERM);
  }).detach();
}

}  // namespace ddp::launcher
