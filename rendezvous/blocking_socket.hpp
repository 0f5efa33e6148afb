// A TCP connection with deadline-bounded blocking reads and writes, for the store client.
// It drives a private Asio io_context only while a call is in progress, so no thread is owned.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "rendezvous/store_stream.hpp"

namespace ddp::rendezvous {

// A StoreStream (store_stream.hpp: what blocks, what throws) over TCP.
class BlockingSocket final : public StoreStream {
 public:
  // Resolves `host` (name, IPv4, IPv6, "[v6]") and connects once to the first address that
  // accepts. Sets TCP_NODELAY.
  BlockingSocket(const std::string& host, std::uint16_t port, TimePoint deadline);

  void write_all(const std::string& bytes, TimePoint deadline) override;
  std::string read_exact(std::size_t n, TimePoint deadline) override;
  void close() override;
  // Shuts the connection down at the OS level.
  void interrupt() override;
  // Brackets for IPv6.
  std::string peer() const override { return peer_; }
  std::string local_address() const override { return local_; }

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
