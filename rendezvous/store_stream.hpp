// The byte stream a TcpStoreClient speaks the TCPStore protocol over: a TCP connection
// (blocking_socket.hpp), or a connection to a TcpStoreServer of the same process that needs no
// socket (in_process_stream.hpp).
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace ddp::rendezvous {

// Not thread-safe except interrupt(): the client serialises calls. Every call blocks until done
// or `deadline`. Throws TimeoutError at the deadline, ConnectionError when the peer is gone or
// unreachable. After any throw from read/write the stream position is undefined: the owner must
// treat the stream as broken (except when it knows nothing was consumed, e.g. a 1-byte read
// timing out).
class StoreStream {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  virtual ~StoreStream() = default;
  virtual void write_all(const std::string& bytes, TimePoint deadline) = 0;
  // Reads exactly `n` bytes.
  virtual std::string read_exact(std::size_t n, TimePoint deadline) = 0;
  virtual void close() = 0;
  // Thread-safe, non-blocking: a call blocked in another thread fails promptly with
  // ConnectionError, and so does every later one. The only method safe to call concurrently.
  virtual void interrupt() = 0;
  // "host:port" of the peer, for messages.
  virtual std::string peer() const = 0;
  // This end's IP address (no port, no brackets), as the peer sees it.
  virtual std::string local_address() const = 0;
};

}  // namespace ddp::rendezvous
