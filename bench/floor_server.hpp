// The loopback floor for the store benchmark: a server that does nothing but move bytes, on one
// Asio thread like the store servers, so the load generator can measure what a round trip of the
// same message sizes costs with no store behind it.
//   Echo:  each complete request of `request_bytes` is answered with `reply_bytes` zero bytes
//          (the floor of one store request/reply).
//   Relay: connections are paired in accept order (1st with 2nd, 3rd with 4th, …) and every byte
//          read from one is written to the other (the floor of a wait/set ping-pong, where the
//          store passes a message from one client to another).
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
