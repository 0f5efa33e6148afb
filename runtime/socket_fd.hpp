// POSIX TCP plumbing for the CPU communicator: an owning descriptor, a listener on an ephemeral
// port, deadline-bounded connect/accept and exact reads/writes for the small handshake. The hot
// path (ring_transfer.cpp) drives the same descriptors non-blocking with poll().
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace ddp::runtime {

using Clock = std::chrono::steady_clock;

// Owns one file descriptor; closes it on destruction. Move-only. Not thread-safe.
class SocketFd {
 public:
  SocketFd() = default;
  explicit SocketFd(int fd) : fd_(fd) {}
  ~SocketFd() { reset(); }
  SocketFd(SocketFd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  SocketFd& operator=(SocketFd&& other) noexcept;
  SocketFd(const SocketFd&) = delete;
  SocketFd& operator=(const SocketFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void reset();

 private:
  int fd_ = -1;
};

// Listens on `bind_host` (IPv4/IPv6 literal; "" = every IPv4 address) at an ephemeral port.
// Throws rendezvous::BindError. Does not block.
SocketFd listen_ephemeral(const std::string& bind_host, std::uint16_t& port_out);

// Connects to host:port (name or literal), retrying refused connections until `deadline`.
// Returns a non-blocking socket with TCP_NODELAY. Throws rendezvous::TimeoutError or
// rendezvous::ConnectionError naming `who`.
SocketFd connect_until(const std::string& host, std::uint16_t port, Clock::time_point deadline, const std::string& who);

// Accepts one connection before `deadline`; returns it non-blocking with TCP_NODELAY.
// Throws rendezvous::TimeoutError naming `who`.
SocketFd accept_until(int listener, Clock::time_point deadline, const std::string& who);

// Blocking-with-deadline exact write/read on a non-blocking socket (for handshakes). Throw
// rendezvous::TimeoutError, or rendezvous::ConnectionError when the peer closed; both name `who`.
void write_exact(int fd, const void* data, std::size_t n, Clock::time_point deadline, const std::string& who);
void read_exact(int fd, void* data, std::size_t n, Clock::time_point deadline, const std::string& who);

// Milliseconds left until `deadline` for poll(): never negative, capped to fit an int.
int poll_timeout_ms(Clock::time_point deadline);

// An address of this host that peers can likely reach: the first non-loopback IPv4 address the
// host name resolves to, else "127.0.0.1".
std::string guess_local_address();

}  // namespace ddp::runtime
