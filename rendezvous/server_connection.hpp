// One accepted connection of the TcpStoreServer: reads into a 4 KiB buffer, parses requests
// incrementally, hands each to the server's StoreState and writes replies through a queue.
// Lives on the server's event loop only; its lifetime is held by shared_from_this in pending
// handlers and by the server's connection table.
#pragma once

#include <array>
#include <deque>
#include <memory>
#include <string>

#include <boost/asio/ip/tcp.hpp>

#include "rendezvous/request_parser.hpp"
#include "rendezvous/store_state.hpp"

namespace ddp::rendezvous {

class TcpStoreServer;

class ServerConnection : public std::enable_shared_from_this<ServerConnection> {
 public:
  ServerConnection(TcpStoreServer& server, ClientId id, boost::asio::ip::tcp::socket socket);

  // Starts reading. Handlers never throw: a protocol error closes this connection only.
  void start();
  // Queues bytes for sending (in order).
  void send(std::string bytes);
  // Closes the socket; pending handlers finish with operation_aborted. Idempotent.
  void close();

  const std::string& peer() const { return peer_; }

 private:
  void read_some();
  void on_read(std::size_t n);
  void write_next();

  TcpStoreServer& server_;
  ClientId id_;
  boost::asio::ip::tcp::socket socket_;
  std::string peer_;
  std::array<char, 4096> buffer_{};
  RequestParser parser_;
  std::deque<std::string> write_queue_;
  bool closed_ = false;
};

}  // namespace ddp::rendezvous
