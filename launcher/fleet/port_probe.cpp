// See port_probe.hpp.
#include "launcher/fleet/port_probe.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include <fmt/format.h>


namespace ddp::launcher {
namespace {

void answer(const std::string& text) { std::cout << kProbeTag << ' ' << text << std::endl; }

// Waits for end of input on stdin (the controller is done with us).
void until_stdin_ends() {
  char buf[256];
  while (::read(0, buf, sizeof buf) > 0 || errno == EINTR) errno = 0;
}

int listen_probe(int port) {
  int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_storage addr{};
  socklen_t len = 0;
  const int yes = 1;
  const int no = 0;
  if (fd >= 0) {
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &no, sizeof no);  // both families, as the store listens
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&addr);
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(static_cast<uint16_t>(port));
    a6->sin6_addr = in6addr_any;
    len = sizeof(sockaddr_in6);
  } else {  // no IPv6 on this host
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    auto* a4 = reinterpret_cast<sockaddr_in*>(&addr);
    a4->sin_family = AF_INET;
    a4->sin_port = htons(static_cast<uint16_t>(port));
    len = sizeof(sockaddr_in);
  }
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);  // the store sets it too
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(fd, 64) != 0) {
    answer(fmt::format("port-taken {} {}", port, std::strerror(errno)));
    return 0;
  }
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int bound = ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                                                     : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  answer(fmt::format("listening {}", bound));
  until_stdin_ends();  // connections wait in the backlog: a completed handshake is all a host needs
  ::close(fd);
  return 0;
}

// One connection attempt to host:port within `timeout_ms`: "" on success, else the reason.
std::string try_connect(const std::string& host, int port, int timeout_ms) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int r = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); r != 0) {
    return fmt::format("{} does not resolve here ({})", host, ::gai_strerror(r));
  }
  std::string reason;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    int err = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      err = ::poll(&p, 1, timeout_ms) == 1 ? 0 : ETIMEDOUT;
      socklen_t l = sizeof err;
      if (err == 0) ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l);
    }
    ::close(fd);
    if (err == 0) {
      ::freeaddrinfo(found);
      return "";
    }
    char text[64] = "?";
    ::getnameinfo(a->ai_addr, a->ai_addrlen, text, sizeof text, nullptr, 0, NI_NUMERICHOST);
    reason = fmt::format("{} ({}:{}): {}", host, text, port, std::strerror(err));
  }
  ::freeaddrinfo(found);
  return reason;
}

int connect_probe(const std::string& host) {
  std::string go;
  if (!std::getline(std::cin, go) || go.rfind("go ", 0) != 0) return 0;  // node 0 failed: nothing to try
  const std::string reason = try_connect(host, std::stoi(go.substr(3)), 5000);
  answer(reason.empty() ? "reached" : "unreachable " + reason);
  return 0;
}

}  // namespace

int run_port_probe(const LaunchConfig& c) {
  if (c.fleet.fleet_probe == "listen") return listen_probe(c.master_port);
  return connect_probe(c.master_addr);
}

}  // namespace ddp::launcher
