// The loopback floor for the store benchmark: a server that does nothing but move bytes, on one
// Asio thread like the store servers, so the load generator can measure what a round trip of the
// same message sizes costs with no store behind it.
//   Echo:  each complete request of `request_bytes` is answered with `reply_bytes` zero bytes
//          (the floor of one store request/reply).
//   Relay: connections are paired in accept order (1st with 2nd, 3rd with 4th, …) and every byte
//          read from one is written to the other (one message each way).
//   Ping-pong (relay with message_bytes > 0): paired the same way, but with the store's wire
//          pattern of a wait/set ping-pong: each side sends messages of message_bytes (a SET, then
//          the next WAIT, as two writes) and a SET is answered with one byte to the partner (its
//          WAIT's STOP_WAITING). The first of a pair starts with a SET (messages 1, 3, 5, … are
//          SETs), the second with its WAIT (messages 2, 4, … are SETs). So the kernel sees the
//          same segments, reads and writes as with a store, and only the store's work is missing.
// Blocks in run() until the io_context is stopped. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

namespace ddp::bench {

struct FloorServerOptions {
  bool relay = false;
  std::size_t request_bytes = 24;
  std::size_t reply_bytes = 8;
  std::size_t message_bytes = 0;  // relay: 0 relays bytes, > 0 is the ping-pong pattern above
};

class FloorServer {
 public:
  // Listens on 127.0.0.1 with a free port.
  FloorServer(boost::asio::io_context& io, FloorServerOptions options);
  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }

 private:
  struct Peer;
  void accept_next();
  void read(const std::shared_ptr<Peer>& peer);

  FloorServerOptions options_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::shared_ptr<Peer> unpaired_;
  std::vector<char> zeros_;
};

}  // namespace ddp::bench
