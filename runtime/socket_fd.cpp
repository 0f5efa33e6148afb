// POSIX socket helpers for the CPU communicator (see socket_fd.hpp). Deadlines are enforced with
// poll() on non-blocking descriptors, so no call can block past its deadline.
#include "runtime/socket_fd.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "common/host_name.hpp"
#include "ddplaunch/rendezvous/error.hpp"

namespace ddp::runtime {
namespace {

using rendezvous::ConnectionError;
using rendezvous::TimeoutError;

std::string errno_text(int err) {
  return std::strerror(err);
}

void set_nonblocking_nodelay(int fd) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// Waits until `events` on fd or the deadline; false on timeout.
bool wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, poll_timeout_ms(deadline));
    if (rc > 0) return true;
    if (rc == 0) {
      if (Clock::now() >= deadline) return false;
      continue;
    }
    if (errno != EINTR) throw ConnectionError("poll failed: " + errno_text(errno));
  }
}

}  // namespace

SocketFd& SocketFd::operator=(SocketFd&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

void SocketFd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

int poll_timeout_ms(Clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 1 << 30));
}

SocketFd listen_ephemeral(const std::string& bind_host, std::uint16_t& port_out) {
  const bool v6 = bind_host.find(':') != std::string::npos;
  SocketFd fd(::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) throw rendezvous::BindError("socket() failed: " + errno_text(errno));
  sockaddr_storage addr{};
  socklen_t len = 0;
  if (v6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
    a->sin6_family = AF_INET6;
    if (::inet_pton(AF_INET6, bind_host.c_str(), &a->sin6_addr) != 1)
      throw rendezvous::BindError("bad IPv6 address '" + bind_host + "' to listen on");
    len = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&addr);
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_ANY);
    if (!bind_host.empty() && ::inet_pton(AF_INET, bind_host.c_str(), &a->sin_addr) != 1)
      throw rendezvous::BindError("bad IPv4 address '" + bind_host + "' to listen on");
    len = sizeof *a;
  }
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(fd.get(), 64) != 0)
    throw rendezvous::BindError("cannot listen on '" + bind_host + "': " + errno_text(errno));
  len = sizeof addr;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len);
  port_out =
      ntohs(v6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  return fd;
}

SocketFd connect_until(const std::string& host, std::uint16_t port, Clock::time_point deadline,
                       const std::string& who) {
  std::string last_error = "no attempt";
  auto backoff = std::chrono::milliseconds(5);
  while (Clock::now() < deadline) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_family = AF_UNSPEC;
    addrinfo* res = nullptr;
    const int gai = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
    if (gai != 0) {
      last_error = std::string("cannot resolve: ") + ::gai_strerror(gai);
    } else {
      for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
        SocketFd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
        if (!fd.valid()) continue;
        set_nonblocking_nodelay(fd.get());
        int rc = ::connect(fd.get(), ai->ai_addr, ai->ai_addrlen);
        if (rc != 0 && errno == EINPROGRESS) {
          if (!wait_for(fd.get(), POLLOUT, deadline)) break;
          int err = 0;
          socklen_t len = sizeof err;
          ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
          rc = err == 0 ? 0 : -1;
          errno = err;
        }
        if (rc == 0) {
          ::freeaddrinfo(res);
          return fd;
        }
        last_error = errno_text(errno);
      }
      ::freeaddrinfo(res);
    }
    // No event tells us when a peer starts listening; retry with a short, growing backoff.
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - Clock::now()));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
  }
  throw TimeoutError("timed out connecting to " + who + " at " + host + ":" + std::to_string(port) +
                     " (last error: " + last_error + "); check that it is running and reachable");
}

SocketFd accept_until(int listener, Clock::time_point deadline, const std::string& who) {
  for (;;) {
    if (!wait_for(listener, POLLIN, deadline)) throw TimeoutError("timed out waiting for " + who + " to connect");
    SocketFd fd(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
    if (fd.valid()) {
      set_nonblocking_nodelay(fd.get());
      return fd;
    }
    // Transient accept failures (the peer reset before we accepted, EINTR): keep waiting.
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
      throw ConnectionError("accept failed while waiting for " + who + ": " + errno_text(errno));
  }
}

void write_exact(int fd, const void* data, std::size_t n, Clock::time_point deadline, const std::string& who) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w > 0) {
      p += w;
      n -= static_cast<std::size_t>(w);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      if (!wait_for(fd, POLLOUT, deadline)) throw TimeoutError("timed out sending to " + who);
    } else {
      throw ConnectionError("lost connection to " + who + ": " + errno_text(errno));
    }
  }
}

void read_exact(int fd, void* data, std::size_t n, Clock::time_point deadline, const std::string& who) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t r = ::recv(fd, p, n, 0);
    if (r > 0) {
      p += r;
      n -= static_cast<std::size_t>(r);
    } else if (r == 0) {
      throw ConnectionError(who + " closed the connection");
    } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      if (!wait_for(fd, POLLIN, deadline)) throw TimeoutError("timed out receiving from " + who);
    } else {
      throw ConnectionError("lost connection to " + who + ": " + errno_text(errno));
    }
  }
}

std::string guess_local_address() {
  const std::string name = host_name();
  if (name.empty()) return "127.0.0.1";
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(name.c_str(), nullptr, &hints, &res) != 0) return "127.0.0.1";
  std::string out = "127.0.0.1";
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(ai->ai_addr);
    if ((ntohl(a->sin_addr.s_addr) >> 24) == 127) continue;
    char buf[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf);
    out = buf;
    break;
  }
  ::freeaddrinfo(res);
  return out;
}

}  // namespace ddp::runtime
