// A TcpStoreClient's connection to a TcpStoreServer of the same process, without a socket
// (TcpStoreClientOptions::in_process): the launcher that hosts the job's store uses one for its
// own rendezvous, outcome and heartbeats instead of a TCP connection to itself.
//
// The request bytes the client writes are parsed and handled by the server's StoreState as a TCP
// connection's are (the same handshake and job-secret proof, memory budget, waits and wake-ups);
// the replies come back through the peer's inbox instead of a socket.
//
// Until the server's loop runs (TcpStoreServer::start), a request is handled at once on the
// caller's thread, under the hub's mutex: a launcher that meets no one but itself (one node) does
// its whole rendezvous without a thread switch or a system call. Once the loop runs, requests are
// posted to it and the caller waits for the reply. A read whose reply is not there yet starts the
// loop if it does not run: only the loop's other connections can produce it (a WAIT parked on a
// key that a TCP client is to set).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/request.hpp"
#include "rendezvous/request_parser.hpp"
#include "rendezvous/store_state.hpp"
#include "rendezvous/store_stream.hpp"

namespace ddp::rendezvous {

class TcpStoreServer;

// One in-process connection, shared by its stream and the server.
struct InProcessPeer {
  explicit InProcessPeer(ClientId client) : id(client) {}

  // Appends reply bytes and wakes the reader. Any thread.
  void receive(std::string_view bytes);
  // No reply will come any more: a blocked or later read throws ConnectionError naming `why`
  // (the first reason given is kept). Any thread.
  void break_off(const std::string& why);

  const ClientId id;
  // Used by whoever handles the connection's requests: the caller's thread (under the hub's
  // mutex) before the loop runs, the loop thread after.
  RequestParser parser;
  Request request;
  bool attached = false;  // known to the server's StoreState
  // The replies, under `mutex`.
  std::mutex mutex;
  std::condition_variable arrived;
  // Reply bytes; those before `read_from` were read already. A read moves the offset rather than
  // erasing from the front, so reading a reply of N small fields (LIST_KEYS) is O(N), not O(N^2);
  // the read bytes go once they are half of the buffer, or all of it.
  std::string replies;
  std::size_t read_from = 0;
  std::string broken;  // why no reply will come any more; "" while the connection is usable
};

// What a TcpStoreServer shares with its in-process streams. A stream keeps it alive, so a stream
// that outlives its server finds `server` null and fails with ConnectionError.
struct InProcessHub {
  // Guards everything below; held while a request is handled off the loop, so the loop cannot
  // start meanwhile, and by the server's destructor while it lets go.
  std::mutex mutex;
  TcpStoreServer* server = nullptr;                 // null once the server is being destroyed
  bool running = false;                             // the loop runs (start() or run()): requests go through it
  std::vector<std::weak_ptr<InProcessPeer>> peers;  // broken off when the server goes
};

// A StoreStream (store_stream.hpp: what blocks, what throws) to the server of `hub`.
class InProcessStream final : public StoreStream {
 public:
  // `peer_name` names the server in messages; `local_address` is what local_address() reports.
  InProcessStream(std::shared_ptr<InProcessHub> hub, std::shared_ptr<InProcessPeer> peer, std::string peer_name,
                  std::string local_address);
  // Closes the connection (the server forgets its waits).
  ~InProcessStream() override;
  InProcessStream(const InProcessStream&) = delete;
  InProcessStream& operator=(const InProcessStream&) = delete;

  // Handles the requests at once (loop not running) or posts them to the loop. Never blocks
  // beyond the hub's mutex; `deadline` is not needed.
  void write_all(const std::string& bytes, TimePoint deadline) override;
  std::string read_exact(std::size_t n, TimePoint deadline) override;
  void close() override;
  void interrupt() override;
  std::string peer() const override { return peer_name_; }
  std::string local_address() const override { return local_address_; }

 private:
  // Starts the server's loop unless it runs (or the server is gone).
  void start_loop();

  std::shared_ptr<InProcessHub> hub_;
  std::shared_ptr<InProcessPeer> peer_;
  std::string peer_name_;
  std::string local_address_;
  bool closed_ = false;
};

// The local IP address (no brackets) a TCP connection from this host to host:port would come
// from: what a TcpStoreClient's local_address() reports, found with a connected UDP socket (no
// packet is sent). "" when `host` does not resolve. Blocks only for a name lookup.
std::string local_address_towards(const std::string& host, std::uint16_t port);

}  // namespace ddp::rendezvous
