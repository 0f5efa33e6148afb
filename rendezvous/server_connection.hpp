// One accepted connection of the TcpStoreServer: reads into the server's one 4 KiB buffer (an
// idle connection holds none), parses requests incrementally, hands each to the server's
// StoreState and writes the replies.
// Lives on the server's event loop only; its lifetime is held by shared_from_this in pending
// handlers and by the server's connection table.
//
// Writing, step by step (each store request costs the server a read() and a write() in the
// kernel's TCP path, so the connection avoids every call beyond those):
//   1. Replies to this connection's own requests are collected while one read's worth of
//      requests is handled and written once afterwards (a pipelining client gets one write for
//      the batch).
//   2. Bytes for a connection with nothing in flight (a woken waiter, the batch of step 1) go
//      straight to the non-blocking socket: one write() and no trip through the event loop.
//   3. Only what the kernel does not take at once waits for an async write, and bytes sent
//      meanwhile queue behind it, in order.
// Limits (TcpStoreServerOptions):
//   - one deadline timer: armed at accept for the handshake (the first complete request); after
//     it, armed when the connection starts owing something (a partial request is buffered, or
//     replies wait for an async write) and disarmed when it owes nothing again, so a client
//     parked in WAIT is never timed out. Expiry closes the connection;
//   - with more than max_unsent_bytes of replies unsent, the connection's remaining input waits
//     (parsing and reading pause) until the client has read enough of them;
//   - its partial request and unsent replies are charged to the server's memory budget
//     (ConnectionCharge); a partial request that does not fit closes it, and so does a request
//     the server refuses (TcpStoreServer::handle).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "rendezvous/memory_budget.hpp"
#include "rendezvous/request_parser.hpp"
#include "rendezvous/store_state.hpp"

namespace ddp::rendezvous {

class TcpStoreServer;

class ServerConnection : public std::enable_shared_from_this<ServerConnection> {
 public:
  // `peer` is the remote endpoint as accept() reported it.
  ServerConnection(TcpStoreServer& server, ClientId id, boost::asio::ip::tcp::socket socket,
                   const boost::asio::ip::tcp::endpoint& peer);

  // Starts reading. Handlers never throw: a protocol error closes this connection only.
  void start();
  // Sends bytes after everything sent before (see the steps above). A failed write closes the
  // connection through the server.
  void send(std::string_view bytes);
  // Closes the socket; pending handlers finish with operation_aborted. Idempotent.
  // `peer_closed`: the peer has closed its side (EOF), so no shutdown() is needed before close.
  void close(bool peer_closed = false);

  // "host:port" of the peer, for log lines.
  std::string peer() const;
  const boost::asio::ip::tcp::endpoint& peer_endpoint() const { return peer_; }
  ClientId id() const { return id_; }

 private:
  // Reads now (the server's buffer); with nothing there, waits for readability. The wait is only
  // ever armed right after a read that emptied the socket, in the same turn of the loop: the
  // reactor's epoll is edge-triggered, so a wait armed later could miss bytes already there.
  void read_some();
  void wait_readable();
  void on_read(std::size_t n);
  // Hands pending_ to the kernel (step 2) or to an async write (step 3), then updates the
  // deadline and the server's published memory count.
  void flush();
  void write_pending();
  // Parses and handles what is in `input` until it is used up or the unsent replies exceed the
  // cap; keeps the rest in backlog_. Returns false when the connection was closed meanwhile.
  bool handle_input(std::string_view input);
  // After a write completed: when paused and the unsent replies are under the cap again,
  // handles the backlog and reads on.
  void resume();
  std::size_t unsent() const { return pending_.size() + in_flight_.size(); }
  // Arms or disarms the deadline after an event changed what the connection owes (above).
  void update_deadline();
  void arm_deadline(std::chrono::milliseconds after);
  // Why the deadline closed the connection, for the log line.
  std::string deadline_reason() const;

  TcpStoreServer& server_;
  ClientId id_;
  boost::asio::ip::tcp::socket socket_;
  boost::asio::ip::tcp::endpoint peer_;
  RequestParser parser_;
  // Reused for every request and its replies, so handling one allocates nothing of its own.
  Request request_;
  std::vector<Outgoing> outgoing_;
  std::string pending_;    // bytes not yet handed to the kernel or to an async write
  std::string in_flight_;  // bytes an async write is sending
  bool writing_ = false;   // an async write is in flight
  bool batching_ = false;  // handling this connection's requests: collect its replies
  bool closed_ = false;
  bool handshaken_ = false;  // a complete request arrived: the handshake deadline is off
  bool paused_ = false;      // input waits in backlog_ until the unsent replies drain
  std::string backlog_;      // input not parsed yet because of the cap
  ConnectionCharge charge_;  // this connection's part of the memory budget
  boost::asio::steady_timer deadline_;
  bool deadline_armed_ = false;
  // Bumped by every arm and disarm: a timer handler of an earlier arming does nothing (disarming
  // does not cancel the wait, it lets it lapse; re-arming replaces it).
  std::uint64_t deadline_generation_ = 0;
};

}  // namespace ddp::rendezvous
