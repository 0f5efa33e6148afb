// A TCP connection with deadline-bounded blocking reads and writes, for the store client.
// It drives a private Asio io_context only while a call is in progress, so no thread is owned.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

namespace ddp::rendezvous {

// Not thread-safe (the client serialises calls). Every call blocks until done or `deadline`.
// Throws TimeoutError at the deadline, ConnectionError when the peer is gone or unreachable.
// After any throw from read/write the stream position is undefined: the owner must treat the
// connection as broken (except when it knows nothing was consumed, e.g. a 1-byte read timing out).
class BlockingSocket {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // Resolves `host` (name, IPv4, IPv6, "[v6]") and connects once to the first address that
  // accepts. Sets TCP_NODELAY.
  BlockingSocket(const std::string& host, std::uint16_t port, TimePoint deadline);

  void write_all(const std::string& bytes, TimePoint deadline);
  // Reads exactly `n` bytes.
  std::string read_exact(std::size_t n, TimePoint deadline);
  void close();
  // Thread-safe, non-blocking: shuts the connection down at the OS level, so a call blocked in
  // another thread fails promptly with ConnectionError. The only method safe to call concurrently.
  void interrupt();

  // "host:port" of the peer, brackets for IPv6.
  std::string peer() const { return peer_; }
  // This end's IP address (no port, no brackets), as the peer sees it.
  std::string local_address() const { return local_; }

 private:
  // Runs the io_context until the started operation completes or the deadline passes; on the
  // deadline cancels the operation and throws TimeoutError naming `what`.
  void run_until(TimePoint deadline, const bool& done, const char* what);

  boost::asio::io_context io_;
  boost::asio::ip::tcp::socket socket_;
  std::string peer_;
  std::string local_;
  // The descriptor as interrupt() sees it; the mutex keeps close() from releasing the number
  // (which the OS may reuse) while interrupt() is shutting it down.
  std::mutex fd_mutex_;
  int fd_ = -1;
};

}  // namespace ddp::rendezvous
