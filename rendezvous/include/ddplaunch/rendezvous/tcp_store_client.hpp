// A C++ client of PyTorch's TCPStore protocol: talks to our TcpStoreServer and to PyTorch's own
// server (`torch.distributed.TCPStore(is_master=True)`) alike.
//
// Like c10d's client it prefixes every user key with "/" on the wire (options.key_prefix), so a
// key set here is the same key for a Python `TCPStore` client of the same server.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ddplaunch/rendezvous/error.hpp"
#include "ddplaunch/rendezvous/store.hpp"
#include "ddplaunch/rendezvous/store_auth.hpp"

namespace ddp::rendezvous {

// Private parts (rendezvous/store_stream.hpp, rendezvous/request.hpp).
class StoreStream;
struct Request;
class TcpStoreServer;

struct TcpStoreClientOptions {
  std::string host = "127.0.0.1";  // name, IPv4 or IPv6 address (brackets allowed: "[::1]")
  std::uint16_t port = 29500;
  // How long the constructor keeps retrying (exponential backoff with jitter) to connect and
  // complete the VALIDATE/PING handshake.
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(60)};
  // While the constructor retries, `on_waiting` (when set) gets a status line about every
  // `waiting_interval`: the address, how long so far, and the last connect error. It runs on the
  // constructing thread and must not throw.
  std::function<void(const std::string&)> on_waiting;
  std::chrono::milliseconds waiting_interval{std::chrono::seconds(10)};
  // Whether a store that refuses this host's address (RefusedError) is retried until
  // connect_timeout like one not listening yet: a node coming back to a static job with restarts
  // left, which node 0 admits from any address once the next round forms.
  bool retry_refused = false;
  // Deadline for every reply of a non-waiting call (set, add, …). Waits take their own timeout.
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  std::string key_prefix = "/";
  // When auth.prove is set, the handshake also proves the job secret (store_auth.hpp); the
  // constructor throws AuthError, without retrying, when the store denies the proof or checks none.
  StoreAuth auth;
  // A server of this process to talk to without a socket (TcpStoreServer::open_stream), with
  // the same protocol, handshake and semantics: nothing is retried, and `host` and `port` only
  // name the store and say what local_address() is (the address a TCP connection to them would
  // come from). Used by the constructor only: the server must outlive that; a client that
  // outlives the server gets ConnectionError.
  TcpStoreServer* in_process = nullptr;
};

// Thread-safe: one request at a time on the single connection (a mutex serialises callers).
// Every blocking call has a deadline. Errors: TimeoutError when a deadline passes;
// ConnectionError when the server is unreachable or the connection broke (after which every
// call throws ConnectionError); ProtocolError on a malformed reply.
// A wait or barrier that times out sends CANCEL_WAIT and reads its answer before throwing, so
// the connection stays usable.
class TcpStoreClient final : public Store {
 public:
  // Connects and handshakes; blocks up to options.connect_timeout. Throws AuthError (see
  // TcpStoreClientOptions::auth), RefusedError (the store refuses this host's address, unless
  // retry_refused) or
  // ConnectionError.
  explicit TcpStoreClient(TcpStoreClientOptions options);
  ~TcpStoreClient() override;

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, Duration timeout) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  std::string compare_set(const std::string& key, const std::string& expected, const std::string& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, Duration timeout) override;
  bool delete_key(const std::string& key) override;
  std::int64_t num_keys() override;

  // The rest of the protocol, beyond the Store interface.
  void append(const std::string& key, const std::string& bytes);
  // Waits for all keys (TimeoutError after `timeout`), then returns their values in order.
  std::vector<std::string> multi_get(const std::vector<std::string>& keys, Duration timeout);
  void multi_set(const std::vector<std::string>& keys, const std::vector<std::string>& values);
  void queue_push(const std::string& key, const std::string& value);
  // Non-blocking pop: nullopt when the queue is empty.
  std::optional<std::string> try_queue_pop(const std::string& key);
  // Blocking pop: waits until the queue has an element (TimeoutError after `timeout`).
  std::string queue_pop(const std::string& key, Duration timeout);
  std::int64_t queue_len(const std::string& key);
  // User keys (those under key_prefix, with it removed), in no particular order.
  std::vector<std::string> list_keys();
  // Server-side barrier: returns once `world_size` callers reached `key`. TimeoutError after
  // `timeout` (this caller's arrival stays counted, as in PyTorch).
  void barrier(const std::string& key, std::int64_t world_size, Duration timeout);
  // Round trip with a nonce; returns the elapsed time.
  std::chrono::microseconds ping();

  // Thread-safe and non-blocking: breaks the connection so that a call blocked in another thread
  // (a long wait) throws ConnectionError promptly. The client is unusable afterwards.
  void interrupt() override;
  // The local IP address of the connection (fixed once connected). Thread-safe.
  std::string local_address() override { return local_address_; }

  const TcpStoreClientOptions& options() const { return options_; }

 private:
  void connect_with_retries();
  // Takes `stream` as the connection and handshakes on it (throws as handshake() does, the
  // stream kept in socket_ for the caller to close).
  void use_stream(std::unique_ptr<StoreStream> stream, std::chrono::steady_clock::time_point deadline);
  void handshake(std::chrono::steady_clock::time_point deadline);
  void authenticate(std::chrono::steady_clock::time_point deadline);
  std::chrono::steady_clock::time_point reply_deadline() const;
  // Runs `body` holding the connection; if it throws, the connection is closed for good, since
  // the stream may hold unread reply bytes. `what` names the request in the broken-reason.
  template <class F>
  auto locked(const char* what, F&& body);
  void send(const Request& request);
  // Sends a WAIT (or BARRIER) and waits up to `timeout` for STOP_WAITING. On timeout cancels
  // the wait on the server, consumes the answer and returns false; the connection stays usable.
  bool await_stop_waiting(const std::string& request, Duration timeout);
  std::optional<std::string> pop_locked(const std::string& key);
  std::vector<std::string> wire_keys(const std::vector<std::string>& keys) const;
  TimeoutError wait_timeout(const char* what, const std::vector<std::string>& keys, Duration timeout) const;
  std::string read_str(std::chrono::steady_clock::time_point deadline);
  std::int64_t read_i64(std::chrono::steady_clock::time_point deadline);
  std::uint8_t read_u8(std::chrono::steady_clock::time_point deadline);
  std::string wire(const std::string& key) const { return options_.key_prefix + key; }

  TcpStoreClientOptions options_;
  std::mutex mutex_;
  std::unique_ptr<StoreStream> socket_;
  // The socket as seen by interrupt(): set once connected, never reset while the client lives
  // (a broken connection's socket is kept until destruction for this reason).
  std::atomic<StoreStream*> interruptible_{nullptr};
  std::unique_ptr<StoreStream> retired_socket_;
  std::string broken_reason_;
  std::string local_address_;  // set by the constructor, read-only after
};

}  // namespace ddp::rendezvous
