// Asio plumbing of the store server: binding, accepting, routing replies to connections, and
// shutdown. All of it runs on the one event loop thread, so StoreState needs no lock.
#include "ddplaunch/rendezvous/tcp_store_server.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <fstream>
#include <iostream>

#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>

#include "common/dial_watch.hpp"
#include "common/format_duration.hpp"
#include "common/log.hpp"
#include "ddplaunch/rendezvous/endpoint.hpp"
#include "ddplaunch/rendezvous/error.hpp"
#include "rendezvous/in_process_stream.hpp"
#include "rendezvous/memory_budget.hpp"
#include "rendezvous/protocol.hpp"
#include "rendezvous/request.hpp"
#include "rendezvous/server_connection.hpp"
#include "rendezvous/store_state.hpp"

namespace ddp::rendezvous {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

int host_somaxconn() {
  std::ifstream in("/proc/sys/net/core/somaxconn");
  int value = 0;
  if (in >> value && value > 0) return value;
  return asio::socket_base::max_listen_connections;
}

// The endpoints to try binding, in order: the resolved host, or for "" dual-stack IPv6 first.
std::vector<tcp::endpoint> bind_candidates(asio::io_context& io, const std::string& host, std::uint16_t port) {
  if (host.empty()) return {tcp::endpoint(tcp::v6(), port), tcp::endpoint(tcp::v4(), port)};
  std::vector<tcp::endpoint> out;
  boost::system::error_code ec;
  tcp::resolver resolver(io);
  const auto results = resolver.resolve(unbracket_host(host), std::to_string(port),
                                        tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec) {
    throw BindError("cannot resolve store address '" + host + "': " + ec.message() +
                    "; use an address of this machine (an IPv6 address goes in brackets: [::1])");
  }
  for (const auto& r : results) out.push_back(r.endpoint());
  return out;
}

void refuse_address(boost::asio::ip::tcp::socket& socket);

}  // namespace

TcpStoreServer::TcpStoreServer(TcpStoreServerOptions options)
    : options_(std::move(options)),
      // One thread runs the loop (run() or start()): the hint lets Asio keep the loop's own
      // handlers in a thread-private queue, as the benchmark's floor server does. Posting from
      // other threads (stop, allow_only) stays safe.
      io_(1),
      acceptor_(io_),
      accept_retry_(io_),
      state_(std::make_unique<StoreState>(options_.auth)),
      budget_(std::make_unique<MemoryBudget>(options_.memory_budget)),
      hub_(std::make_shared<InProcessHub>()),
      report_timer_(io_) {
  hub_->server = this;
  // One connection pauses before it holds an eighth of the budget in replies: a client that
  // GETs large values without reading then costs one or two replies' copying, not a share of
  // the budget's worth of work that delays every other client.
  options_.max_unsent_bytes = std::min(options_.max_unsent_bytes, options_.memory_budget / 8);
  max_connections_ = options_.max_connections;
  if (max_connections_ == 0) {
    rlimit lim{};
    const rlim_t soft = ::getrlimit(RLIMIT_NOFILE, &lim) == 0 ? lim.rlim_cur : 1024;
    max_connections_ = soft == RLIM_INFINITY || soft > (1u << 20) ? (1u << 20) : soft > 128 ? soft - 64 : 64;
  }
  if (!options_.log) {
    options_.log = [](std::string_view line) { log::info("{}", line); };
  }
  const int backlog = options_.backlog > 0 ? options_.backlog : host_somaxconn();
  std::string last_error = "no address to bind";
  for (const auto& ep : bind_candidates(io_, options_.host, options_.port)) {
    boost::system::error_code ec;
    acceptor_.open(ep.protocol(), ec);
    if (!ec && ep.protocol() == tcp::v6()) acceptor_.set_option(asio::ip::v6_only(false), ec);
    if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(backlog, ec);
    if (!ec) {
      port_ = acceptor_.local_endpoint().port();
      accept_next();
      return;
    }
    last_error = format_endpoint(ep.address().to_string(), ep.port()) + ": " + ec.message();
    boost::system::error_code ignored;  // the socket was never usable
    acceptor_.close(ignored);
    if (ec == asio::error::address_in_use) {
      throw AddressInUseError("cannot listen on " +
                              format_endpoint(options_.host.empty() ? "::" : options_.host, options_.port) +
                              ": the port is already in use; stop the other process or pick another port "
                      "(--master_port / --port, or 0 for a free one)");
    }
  }
  throw BindError("cannot listen on " + format_endpoint(options_.host.empty() ? "::" : options_.host, options_.port) +
                  " (" + last_error + "); use an address of this machine");
}

TcpStoreServer::~TcpStoreServer() {
  dial_watch_.reset();  // on the watcher's thread (start_when_dialled): its wait ends aborted
  {
    // In-process streams that outlive the server fail from now on instead of touching it.
    std::lock_guard<std::mutex> lock(hub_->mutex);
    hub_->server = nullptr;
    for (const auto& weak : hub_->peers) {
      if (const auto peer = weak.lock()) peer->break_off("the store has stopped");
    }
  }
  stop();
  // Let the handlers aborted by stop() run, so no connection outlives the loop that owns it.
  io_.restart();
  io_.run();
}

std::string TcpStoreServer::address() const {
  boost::system::error_code ec;
  const auto ep = acceptor_.local_endpoint(ec);
  if (ec) return format_endpoint(options_.host, port_);
  return format_endpoint(ep.address().to_string(), ep.port());
}

void TcpStoreServer::run() {
  {
    std::lock_guard<std::mutex> lock(hub_->mutex);
    DDP_ASSERT(!hub_->running, "store server started twice");
    hub_->running = true;
  }
  io_.run();
}

void TcpStoreServer::start() {
  std::lock_guard<std::mutex> lock(hub_->mutex);
  start_locked();
}

void TcpStoreServer::ensure_started() {
  std::lock_guard<std::mutex> lock(hub_->mutex);
  if (!hub_->running) start_locked();
}

bool TcpStoreServer::serving() const {
  std::lock_guard<std::mutex> lock(hub_->mutex);
  return hub_->running;
}

void TcpStoreServer::start_when_dialled(asio::io_context& watcher) {
  if (serving()) return;
  // The watch goes first in the destructor, so `this` is alive whenever it calls back.
  dial_watch_ = DialWatch::start(watcher, {acceptor_.native_handle()}, [this] { ensure_started(); });
  if (!dial_watch_) ensure_started();  // nothing to watch with: serve now
}

void TcpStoreServer::start_locked() {
  DDP_ASSERT(!hub_->running, "store server started twice");
  hub_->running = true;
  thread_ = std::thread([this] { io_.run(); });
}

std::unique_ptr<StoreStream> TcpStoreServer::open_stream(std::string local_address) {
  auto peer = std::make_shared<InProcessPeer>(next_id_++);
  {
    std::lock_guard<std::mutex> lock(hub_->mutex);
    if (!hub_->server) throw ConnectionError("the store at " + address() + " has stopped");
    auto& peers = hub_->peers;
    peers.erase(std::remove_if(peers.begin(), peers.end(), [](const auto& w) { return w.expired(); }), peers.end());
    peers.push_back(peer);
  }
  return std::make_unique<InProcessStream>(hub_, std::move(peer), address() + " (in this process)",
                                           std::move(local_address));
}

void TcpStoreServer::serve_in_process(const std::shared_ptr<InProcessPeer>& peer, std::string_view input) {
  if (stopped_) return peer->break_off("the store has stopped");
  if (!peer->attached) {
    peer->attached = true;
    state_->connect(peer->id);
    in_process_.emplace(peer->id, peer);
  }
  std::vector<Outgoing> outgoing;
  try {
    while (peer->parser.parse(input, peer->request)) {
      handle(peer->id, std::move(peer->request), outgoing);
      deliver(outgoing);
      outgoing.clear();
    }
  } catch (const Error& e) {
    deliver(outgoing);
    detach_in_process(*peer);  // publishes the memory it freed
    peer->break_off(e.what());
    return;
  }
  publish_memory_used();
}

void TcpStoreServer::post_in_process(std::shared_ptr<InProcessPeer> peer, std::string bytes) {
  asio::post(io_, [this, peer = std::move(peer), bytes = std::move(bytes)] { serve_in_process(peer, bytes); });
}

void TcpStoreServer::detach_in_process(InProcessPeer& peer) {
  if (!peer.attached) return;
  peer.attached = false;
  state_->disconnect(peer.id);
  in_process_.erase(peer.id);
  publish_memory_used();
}

void TcpStoreServer::post_detach(std::shared_ptr<InProcessPeer> peer) {
  asio::post(io_, [this, peer = std::move(peer)] { detach_in_process(*peer); });
}

void TcpStoreServer::stop() {
  asio::post(io_, [this] {
    if (stopped_) return;
    stopped_ = true;
    boost::system::error_code ignored;  // closing a listening socket only fails if it is closed
    acceptor_.close(ignored);
    accept_retry_.cancel();
    report_timer_.cancel();
    report_closed();  // what the interval had not reported yet
    for (auto& [id, conn] : connections_) conn->close();
    connections_.clear();
    for (auto& [id, peer] : in_process_) peer->break_off("the store has stopped");
    in_process_.clear();
    io_.stop();
  });
  std::thread loop;
  {
    std::lock_guard<std::mutex> lock(hub_->mutex);
    if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) loop = std::move(thread_);
  }
  if (loop.joinable()) loop.join();
}

void TcpStoreServer::accept_next() {
  acceptor_.async_accept(accepted_peer_, [this](const boost::system::error_code& ec, tcp::socket socket) {
    if (stopped_ || ec == asio::error::operation_aborted) return;
    namespace errc = boost::system::errc;
    if (ec == errc::too_many_files_open || ec == errc::too_many_files_open_in_system || ec == errc::no_buffer_space ||
        ec == errc::not_enough_memory) {
      if (!accept_starved_) {
        log("accept failed: " + ec.message() + " with " + std::to_string(connections_.size()) +
            " connections open; new connections wait until some close (raise the limit with ulimit -n)");
      }
      accept_starved_ = true;
      accept_retry_.expires_after(std::chrono::milliseconds(50));
      accept_retry_.async_wait([this](const boost::system::error_code& tec) {
        if (!tec && !stopped_) accept_next();
      });
      return;
    }
    if (ec) {
      // A connection reset before accept and the like: log and keep serving.
      log("accept failed: " + ec.message());
    } else {
      if (accept_starved_) log("accepting connections again");
      accept_starved_ = false;
      if (!admitted(accepted_peer_.address())) {
        const std::string who = format_endpoint(accepted_peer_.address().to_string(), accepted_peer_.port());
        refuse_address(socket);
        count_closed(who, "refused: not an address of the job's nodes");
        return accept_next();
      }
      if (connections_.size() >= max_connections_) {
        const std::string who = format_endpoint(accepted_peer_.address().to_string(), accepted_peer_.port());
        boost::system::error_code ignored;  // refusing: nothing to report about a close
        socket.close(ignored);
        count_closed(who, "refused: " + std::to_string(connections_.size()) + " connections open (the cap)");
        return accept_next();
      }
      const ClientId id = next_id_++;
      auto conn = std::make_shared<ServerConnection>(*this, id, std::move(socket), accepted_peer_);
      connections_.emplace(id, conn);
      state_->connect(id);
      conn->start();
    }
    accept_next();
  });
}

namespace {
// Answers a refused peer's PING with kRefusedAddressEcho and closes, without waiting for anything:
// what the client sent so far is read first, so the close is a FIN after the echo (closing with
// unread input would send a reset, which may overtake it).
void refuse_address(tcp::socket& socket) {
  boost::system::error_code ignored;  // refusing: nothing to report about a failure here
  socket.non_blocking(true, ignored);
  std::array<char, 64> sink{};
  socket.read_some(asio::buffer(sink), ignored);
  std::string echo;
  put_u32(echo, kRefusedAddressEcho);
  socket.write_some(asio::buffer(echo), ignored);
  socket.shutdown(tcp::socket::shutdown_send, ignored);
  socket.close(ignored);
}

// IPv4-mapped IPv6 addresses (a dual-stack socket's IPv4 peers) as plain IPv4.
asio::ip::address plain(const asio::ip::address& a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped()) return asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6());
  return a;
}

// IP literals as plain addresses; throws Error naming one that is not, for `caller`.
std::set<asio::ip::address> parse_addresses(const std::vector<std::string>& addresses, const char* caller) {
  std::set<asio::ip::address> out;
  for (const std::string& text : addresses) {
    boost::system::error_code ec;
    const auto a = asio::ip::make_address(unbracket_host(text), ec);
    if (ec) throw Error(std::string(caller) + ": '" + text + "' is not an IP address");
    out.insert(plain(a));
  }
  return out;
}
}  // namespace

void TcpStoreServer::trust_round(const std::vector<std::string>& addresses) {
  asio::post(io_,
             [this, trusted = parse_addresses(addresses, "trust_round")]() mutable { trusted_ = std::move(trusted); });
}

void TcpStoreServer::allow_only(const std::vector<std::string>& addresses) {
  std::set<asio::ip::address> allowed = parse_addresses(addresses, "allow_only");
  asio::post(io_, [this, allowed = std::move(allowed)]() mutable {
    trusted_ = allowed;
    allowed_ = std::move(allowed);
    // Connections opened before the round formed get no lasting access: those from elsewhere go.
    std::vector<ClientId> strangers;
    for (const auto& [id, conn] : connections_) {
      if (!admitted(conn->peer_endpoint().address())) strangers.push_back(id);
    }
    for (ClientId id : strangers) on_close(id, "closed: not an address of the job's nodes");
  });
}

void TcpStoreServer::allow_any() {
  asio::post(io_, [this] { allowed_.reset(); });
}

bool TcpStoreServer::admitted(const asio::ip::address& peer) const {
  if (!allowed_) return true;
  const asio::ip::address p = plain(peer);
  return p.is_loopback() || allowed_->count(p) > 0;
}

void TcpStoreServer::on_close(ClientId id, std::string_view reason, bool peer_closed) {
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  if (!reason.empty()) count_closed(it->second->peer(), reason);
  // num_waiting() walks every connection: counted only when the line is wanted.
  const bool debug = log::enabled(log::Level::Debug);
  const std::size_t before = debug ? state_->num_waiting() : 0;
  state_->disconnect(id);
  if (debug) log_waiters(before, "disconnect", id);
  it->second->close(peer_closed);
  connections_.erase(it);
  publish_memory_used();
}

void TcpStoreServer::handle(ClientId id, Request&& request, std::vector<Outgoing>& out) {
  const std::size_t key_hash = StoreState::key_hash(request);  // once, for both calls below
  // The proof of the job secret stores nothing: it is answered whatever the budget says, so a
  // store that strangers filled still proves the job's launchers (who are exempt from then on).
  if (!state_->handshake(id, request)) {
    const RequestCost cost = state_->cost(request, key_hash);
    // stranger() looks the connection up: asked only of requests that store something.
    const bool from_stranger = cost.stored > 0 && stranger(id);
    if (!budget_->admits(cost.stored, cost.reply, from_stranger) && !exempt(id)) {
      throw Error(std::string(query_name(request.type)) +
                  " refused: " + budget_->refusal(cost.stored, cost.reply, from_stranger));
    }
  }
  if (!log::enabled(log::Level::Debug)) {
    state_->handle(id, std::move(request), key_hash, out);
  } else {
    const std::size_t before = state_->num_waiting();
    const QueryType type = request.type;
    state_->handle(id, std::move(request), key_hash, out);
    log_waiters(before, query_name(type), id);
  }
  budget_->adjust(MemoryBudget::Kind::Stored, budget_->used(MemoryBudget::Kind::Stored), state_->stored_bytes());
}

bool TcpStoreServer::exempt(ClientId id) const {
  return state_->proven(id);
}

bool TcpStoreServer::stranger(ClientId id) const {
  if (!options_.auth.enabled() || state_->proven(id)) return false;
  const auto conn = connections_.find(id);
  if (conn == connections_.end()) return false;  // this process's own connection
  if (!trusted_) return true;                    // no round has formed yet
  const asio::ip::address p = plain(conn->second->peer_endpoint().address());
  return !p.is_loopback() && trusted_->count(p) == 0;
}

void TcpStoreServer::publish_memory_used() {
  memory_used_.store(budget_->used(), std::memory_order_relaxed);
}

void TcpStoreServer::deliver(std::vector<Outgoing>& outgoing) {
  for (auto& out : outgoing) {
    if (auto it = connections_.find(out.client); it != connections_.end()) {
      it->second->send(std::move(out.bytes));
    } else if (auto peer = in_process_.find(out.client); peer != in_process_.end()) {
      peer->second->receive(out.bytes);
    }
  }
}

void TcpStoreServer::log(const std::string& line) const {
  options_.log(line);
}

void TcpStoreServer::count_closed(const std::string& peer, std::string_view reason) {
  if (options_.report_interval.count() == 0) return log("closed connection from " + peer + ": " + std::string(reason));
  log::debug("closed connection from {}: {}", peer, reason);
  if (closed_count_++ == 0) {
    closed_example_ = peer + ": " + std::string(reason);
    report_timer_.expires_after(options_.report_interval);
    report_timer_.async_wait([this](const boost::system::error_code& ec) {
      if (!ec && !stopped_) report_closed();
    });
  }
}

void TcpStoreServer::report_closed() {
  if (closed_count_ == 0) return;
  log(fmt::format("closed {} connection(s) in the last {}, e.g. {}", std::exchange(closed_count_, 0),
                  format_seconds(options_.report_interval), closed_example_));
}

void TcpStoreServer::log_waiters(std::size_t before, std::string_view event, ClientId id) const {
  const std::size_t now = state_->num_waiting();
  if (now == before) return;
  const auto conn = connections_.find(id);
  log::debug("{} from {}: waiters: {} (parked on {} key(s))", event,
             conn != connections_.end() ? conn->second->peer() : "this process", now, state_->num_parked_keys());
}

}  // namespace ddp::rendezvous
