// A raw TCP peer for the loopback tests of the store server (peers that break the protocol on
// purpose, send half a request, or never read), and request bytes built field by field.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>

#include "rendezvous/protocol.hpp"
#include "rendezvous/request.hpp"

namespace ddp::testing {

// A plain POSIX TCP connection to 127.0.0.1, for peers that break the protocol on purpose.
// Every read is bounded by poll().
class RawConnection {
 public:
  explicit RawConnection(std::uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    // Connecting to a listening loopback port completes at once (the backlog absorbs it).
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      const int e = errno;
      ::close(fd_);
      throw std::runtime_error(std::string("connect: ") + std::strerror(e));
    }
    const int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~RawConnection() { close(); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  // False when the peer is gone (EPIPE/ECONNRESET); never raises SIGPIPE.
  bool send_bytes(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return false;
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }

  // Exactly `n` bytes; throws on EOF, error or the deadline.
  std::string read_exact(std::size_t n, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::string out;
    while (out.size() < n) {
      if (!readable_before(deadline)) throw std::runtime_error("raw read timed out");
      char buf[4096];
      const ssize_t r = ::recv(fd_, buf, std::min(sizeof buf, n - out.size()), 0);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) throw std::runtime_error("raw read: connection closed");
      out.append(buf, static_cast<std::size_t>(r));
    }
    return out;
  }

  // Waits until the server closes the connection (EOF or reset), discarding anything it sends.
  // False when the connection is still open at the deadline.
  bool closed_by_peer_within(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (!readable_before(deadline)) return false;
      char buf[4096];
      const ssize_t r = ::recv(fd_, buf, sizeof buf, 0);
      if (r < 0 && errno == EINTR) continue;
      if (r == 0) return true;                // orderly close
      if (r < 0) return errno == ECONNRESET;  // closed with unread data: reset
    }
  }

  std::uint16_t local_port() const {
    sockaddr_in addr{};
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    return ntohs(addr.sin_port);
  }

  // Limits the kernel's receive buffer (a client that never reads then holds little in the
  // kernel, and the server's unsent replies grow in the server, as over a slow network).
  void limit_receive_buffer(int bytes) { ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes); }

  // Closes with a reset (SO_LINGER 0) instead of an orderly FIN.
  void reset() {
    linger l{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    close();
  }

  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  bool readable_before(std::chrono::steady_clock::time_point deadline) {
    for (;;) {
      const auto left =
          std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
      if (left <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      const int r = ::poll(&p, 1, static_cast<int>(left));
      if (r < 0 && errno == EINTR) continue;
      return r > 0;
    }
  }

  int fd_ = -1;
};

// Raw request bytes, built field by field (strings: u64 length + bytes; integers little-endian).
inline std::string validate_bytes(std::uint32_t magic = rendezvous::kValidationMagic) {
  std::string b;
  rendezvous::put_u8(b, static_cast<std::uint8_t>(rendezvous::QueryType::Validate));
  rendezvous::put_u32(b, magic);
  return b;
}

inline std::string ping_bytes(std::uint32_t nonce) {
  std::string b;
  rendezvous::put_u8(b, static_cast<std::uint8_t>(rendezvous::QueryType::Ping));
  rendezvous::put_u32(b, nonce);
  return b;
}

inline std::string keyed_bytes(rendezvous::QueryType type, const std::string& key) {
  std::string b;
  rendezvous::put_u8(b, static_cast<std::uint8_t>(type));
  rendezvous::put_str(b, key);
  return b;
}

inline std::string set_bytes(const std::string& key, const std::string& value) {
  std::string b = keyed_bytes(rendezvous::QueryType::Set, key);
  rendezvous::put_str(b, value);
  return b;
}

inline std::string wait_bytes(const std::string& key) {
  std::string b;
  rendezvous::put_u8(b, static_cast<std::uint8_t>(rendezvous::QueryType::Wait));
  rendezvous::put_i64(b, 1);
  rendezvous::put_str(b, key);
  return b;
}

}  // namespace ddp::testing
