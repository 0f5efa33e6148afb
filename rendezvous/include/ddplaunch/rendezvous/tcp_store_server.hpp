// The TCPStore server: one Asio event loop owns a StoreState and every connection, so no locks
// guard the key-value state. Speaks PyTorch's c10d TCPStore protocol (protocol.hpp).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "ddplaunch/rendezvous/store_auth.hpp"

namespace ddp {
class DialWatch;  // common/dial_watch.hpp
}

namespace ddp::rendezvous {

// The server's private parts (rendezvous/store_state.hpp), declared here so that this public
// header does not pull them in.
class StoreState;
class MemoryBudget;
struct Outgoing;
struct Request;
class StoreStream;
class InProcessStream;
struct InProcessHub;
struct InProcessPeer;
using ClientId = std::uint64_t;

struct TcpStoreServerOptions {
  // Address to bind: an IPv4/IPv6 literal (brackets allowed) or a name; "" binds every address,
  // IPv6 and IPv4 (dual stack), falling back to IPv4 only where IPv6 is off.
  std::string host;
  std::uint16_t port = 0;  // 0 picks a free port; port() tells which
  int backlog = 0;         // 0: the host's net.core.somaxconn
  // Limits that keep a stranger (or a broken client) from exhausting the server while real
  // clients are served:
  //  - a connection that sends no complete request within `handshake_timeout` is closed (idle
  //    floods, half-open handshakes);
  //  - once handshaken, a connection that has started a request (part of it arrived) must
  //    complete it, and replies the kernel could not take at once must be read, within
  //    `request_timeout` of the start; otherwise it is closed (slowloris, half a header then
  //    silence). A connection with nothing half-done is never timed out: a client parked in WAIT
  //    may wait forever. So a real client must send a whole request (at most kMaxRequestBytes,
  //    64 MiB: 6.4 MB/s at the default) and read a reply within it;
  //  - `memory_budget` bounds all the memory the store holds for its clients together: stored
  //    keys and values (map and queues), partial requests and unsent replies of every
  //    connection (rendezvous/memory_budget.hpp has the counting and the rule: neither stored
  //    data nor partial requests plus unsent replies may take more than 3/4 of it). The
  //    connection whose request, partial request or reply would pass it is closed, with the
  //    reason in the summary line: a writer when the store is full, a reader whose reply does
  //    not fit (e.g. one that GETs a large value and never reads). One request is at most
  //    kMaxRequestBytes and APPEND never grows a value past kMaxValueLength (8 MiB).
  //    Connections proven with the job secret (`auth`) are exempt, and the handshake that
  //    proves it is answered before and whatever the budget says: strangers who fill the budget
  //    cannot lock the job's own launchers out. With `auth`, an unproven connection from a host
  //    outside the job's last round (trust_round; before the first round, every one) is a
  //    stranger: it may add stored data only while all of it stays within 1/16 of the budget,
  //    so the job's workers (unproven, from the round's hosts) keep the rest of the share.
  //    Default 1 GiB: a job's real rendezvous data is kilobytes per rank (tens of MiB for ten
  //    thousand ranks) and the replies in flight a few values, so it leaves a wide margin while
  //    bounding node 0's launcher, which shares its host with training processes, to about
  //    1 GiB plus fixed costs (~5 KiB per open connection, bounded by max_connections), where
  //    before one client could grow it until the OOM killer came;
  //  - a connection whose replies the client does not read stops being read once more than
  //    `max_unsent_bytes` of replies wait for it, until they drain (TCP back-pressure for one
  //    pipelining client). It is lowered to memory_budget / 8 when larger, so that one client
  //    pauses well before the budget is reached, and many silent readers cost little work;
  //  - beyond `max_connections` open connections, new ones are closed at accept (0: the soft
  //    descriptor limit minus 64, kept for the process's own files).
  // Closed and refused connections are logged as one summary line per `report_interval` (the
  // count and an example), never a line per connection; each is at debug level too. A zero
  // interval logs each one (tests that check the reason of every close).
  // The constructor throws Error for a memory_budget under 1 MiB.
  std::chrono::milliseconds handshake_timeout{std::chrono::seconds(10)};
  std::chrono::milliseconds request_timeout{std::chrono::seconds(10)};
  std::size_t memory_budget = std::size_t{1} << 30;
  std::size_t max_unsent_bytes = std::size_t{64} << 20;
  std::size_t max_connections = 0;
  std::chrono::milliseconds report_interval{std::chrono::seconds(10)};
  // Where connection-level events go (one line each, without a newline), e.g. why a connection
  // was closed. Default: stderr with a "ddplaunch-store: " prefix. Called on the loop thread.
  std::function<void(std::string_view)> log;
  // Authenticated connections (store_auth.hpp): off by default.
  StoreAuth auth;
};

class ServerConnection;

class TcpStoreServer {
 public:
  // Binds and listens; does not block. Throws BindError naming the address and the fix when the
  // port is taken or the address is not local, Error for a memory_budget under 1 MiB.
  explicit TcpStoreServer(TcpStoreServerOptions options);
  // Stops and joins the background thread if start() was used.
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  std::uint16_t port() const { return port_; }
  // Bytes currently counted against memory_budget (see memory_budget.hpp). Thread-safe: an
  // atomic copy the loop refreshes after every read and write event, so it may lag slightly.
  std::size_t memory_used() const { return memory_used_.load(std::memory_order_relaxed); }
  // Bound address, "host:port" with brackets for IPv6 ("[::]:29500").
  std::string address() const;

  // Serves on the calling thread until stop(). Handlers never throw. Not with start().
  void run();
  // Serves on a background thread owned by the server. Thread-safe; at most once (run() neither).
  void start();
  // start() unless the loop already runs. Thread-safe.
  void ensure_started();
  // Whether the loop runs (run(), start(), or an in-process wait started it). Thread-safe.
  bool serving() const;
  // Unless the loop runs: has `watcher` (another thread's loop) start it once a TCP connection
  // is waiting to be accepted, so a server that only in-process clients use never starts its
  // thread. Call from `watcher`'s thread, or before it runs; the server must be destroyed on that
  // thread too (or while `watcher` is not running), and before `watcher`. Does not block.
  void start_when_dialled(boost::asio::io_context& watcher);
  // A connection from this process that needs no socket (in_process_stream.hpp), for
  // TcpStoreClientOptions::in_process: served like a TCP connection, by the calling thread
  // itself until the loop runs. `local_address` is what its local_address() reports.
  // Thread-safe; throws ConnectionError once the server is being destroyed.
  std::unique_ptr<StoreStream> open_stream(std::string local_address);
  // Thread-safe and idempotent: closes the acceptor and every connection (clients with pending
  // requests see the connection close) and makes run() return. Joins the background thread.
  void stop();

  // From now on, serves only loopback and `addresses` (IP literals; IPv4-mapped IPv6 peers count
  // as their IPv4 address): connections already open from any other address are closed, and new
  // ones refused. Closed and refused peers are counted in the summary line (see
  // report_interval). Throws Error naming a value that is not an IP address. Thread-safe,
  // non-blocking: takes effect on the loop shortly after.
  void allow_only(const std::vector<std::string>& addresses);
  // The hosts of the round that formed last: from now on, unproven connections from loopback
  // and `addresses` (the round's workers) may use the whole stored-data share of the memory
  // budget; those from elsewhere are strangers, limited to 1/16 of it (memory_budget.hpp). Only
  // with `auth`; allow_only does the same. Throws Error naming a value that is not an IP
  // address. Thread-safe, non-blocking: takes effect on the loop shortly after.
  void trust_round(const std::vector<std::string>& addresses);
  // Lifts allow_only: new connections from any address are served again (a lost node may come
  // back from a new address; the caller applies allow_only again once it has). Thread-safe,
  // non-blocking: takes effect on the loop shortly after.
  void allow_any();

  // The loop's io_context, to attach signal handlers or timers to the same loop.
  boost::asio::io_context& context() { return io_; }

 private:
  friend class ServerConnection;
  friend class InProcessStream;
  void accept_next();
  // Forgets a connection and closes it; logs `reason` unless empty. `peer_closed`: after EOF.
  void on_close(ClientId id, std::string_view reason, bool peer_closed = false);
  // Applies one request of connection `id` to the state; replies go to `out`. Throws what
  // StoreState::handle throws, and Error when the request's growth of the stored data or its
  // reply does not fit the memory budget (nothing is applied then). At debug level, logs the
  // waiter count when it changed.
  void handle(ClientId id, Request&& request, std::vector<Outgoing>& out);
  // Sends each reply to its TCP or in-process connection; replies to closed ones are dropped.
  void deliver(std::vector<Outgoing>& outgoing);
  // An in-process connection's requests (in_process_stream.hpp): handled on the calling thread
  // (before the loop runs, with the hub's mutex held; or on the loop), or posted to the loop.
  // A request that breaks the protocol or the memory budget breaks the connection off.
  void serve_in_process(const std::shared_ptr<InProcessPeer>& peer, std::string_view bytes);
  void post_in_process(std::shared_ptr<InProcessPeer> peer, std::string bytes);
  // Forgets an in-process connection and its waits; the same two ways.
  void detach_in_process(InProcessPeer& peer);
  void post_detach(std::shared_ptr<InProcessPeer> peer);
  // start() with the hub's mutex held.
  void start_locked();
  // Whether connection `id` is exempt from the memory budget: a launcher that proved the job
  // secret (its records are small), so that strangers who fill the budget before the round
  // cannot lock the job's own launchers out. Loop thread.
  bool exempt(ClientId id) const;
  // Whether connection `id` is a stranger (see memory_budget): with auth, unproven, over TCP, and
  // not from loopback or a host of the last round (trust_round). Loop thread.
  bool stranger(ClientId id) const;
  void publish_memory_used();  // refreshes memory_used_
  void log(const std::string& line) const;
  // Counts a closed or refused connection for the next summary line (see report_interval).
  void count_closed(const std::string& peer, std::string_view reason);
  // Logs the summary line of the connections counted since the last one, if any (the interval's
  // timer, and stop()).
  void report_closed();
  // Debug level only: when the number of parked connections differs from `before`, logs
  // "<event> from <peer>: waiters: N (parked on K key(s))". So there is one line each time a
  // WAIT or BARRIER parks and each time waiters are woken or dropped, and a test (or a user) can
  // see that a waiter has parked instead of sleeping. Logged before the replies go out: a client
  // that got its reply can rely on the line having been written.
  void log_waiters(std::size_t before, std::string_view event, ClientId id) const;

  // Whether a new connection from `peer` may stay (see allow_only). Loop thread.
  bool admitted(const boost::asio::ip::address& peer) const;

  TcpStoreServerOptions options_;
  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::ip::tcp::endpoint accepted_peer_;  // filled by accept(): no getpeername() later
  // Out of descriptors, the pending connection stays queued and accept() fails again at once:
  // accepting pauses on this timer instead of spinning (there is no event for "a descriptor
  // was freed"), and the condition is logged once per episode.
  boost::asio::steady_timer accept_retry_;
  bool accept_starved_ = false;
  std::uint16_t port_ = 0;
  std::unique_ptr<StoreState> state_;
  // Every TCP connection reads into this one (server_connection.hpp): loop thread only.
  std::array<char, 4096> read_buffer_{};
  std::unique_ptr<MemoryBudget> budget_;  // before connections_: their charges release into it
  std::atomic<ClientId> next_id_{1};  // the loop's accepts and open_stream() on any thread
  std::unordered_map<ClientId, std::shared_ptr<ServerConnection>> connections_;
  std::unordered_map<ClientId, std::shared_ptr<InProcessPeer>> in_process_;  // attached ones
  std::shared_ptr<InProcessHub> hub_;  // also guards thread_ and starting the loop
  std::unique_ptr<DialWatch> dial_watch_;  // start_when_dialled's, on the watcher's loop
  std::optional<std::set<boost::asio::ip::address>> allowed_;  // loop thread; nullopt: everyone
  std::optional<std::set<boost::asio::ip::address>> trusted_;  // trust_round's; nullopt: no round yet
  std::size_t max_connections_ = 0;                            // options_.max_connections, resolved
  boost::asio::steady_timer report_timer_;                     // armed while closed_count_ > 0
  std::size_t closed_count_ = 0;                               // since the last summary line
  std::string closed_example_;                                 // "peer: reason" of the first of them
  std::atomic<std::size_t> memory_used_{0};
  std::thread thread_;
  bool stopped_ = false;
};

}  // namespace ddp::rendezvous
