// TCPStore client. Each public call takes the connection mutex, sends one request and reads its
// reply under a deadline. Any failure that may leave unread bytes on the stream breaks the
// connection for good (later calls throw ConnectionError), so replies are never misattributed.
#include "ddplaunch/rendezvous/tcp_store_client.hpp"

#include <unistd.h>

#include <random>
#include <thread>

#include "common/format_duration.hpp"
#include "ddplaunch/rendezvous/endpoint.hpp"
#include "ddplaunch/rendezvous/error.hpp"
#include "ddplaunch/rendezvous/tcp_store_server.hpp"
#include "rendezvous/blocking_socket.hpp"
#include "rendezvous/in_process_stream.hpp"
#include "rendezvous/request.hpp"

namespace ddp::rendezvous {
namespace {

using Clock = std::chrono::steady_clock;

// Longest reply string accepted. PyTorch's own server has no limit on values, so this is
// generous; it only stops a corrupt length from allocating without bound.
constexpr std::uint64_t kMaxReplyLength = std::uint64_t{1} << 30;

std::string describe_keys(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "'" : ", '") + k + "'";
  return out;
}

Request make(QueryType type, std::vector<std::string> keys = {}, std::vector<std::string> values = {},
             std::int64_t integer = 0) {
  Request r;
  r.type = type;
  r.keys = std::move(keys);
  r.values = std::move(values);
  r.integer = integer;
  return r;
}

}  // namespace

TcpStoreClient::TcpStoreClient(TcpStoreClientOptions options) : options_(std::move(options)) {
  connect_with_retries();
}

TcpStoreClient::~TcpStoreClient() = default;

void TcpStoreClient::connect_with_retries() {
  const auto start = Clock::now();
  const auto deadline = deadline_after(options_.connect_timeout);
  if (options_.in_process) {
    // Nothing to wait for: the server exists, and what fails here fails the same way again.
    use_stream(options_.in_process->open_stream(local_address_towards(options_.host, options_.port)), deadline);
    return;
  }
  std::mt19937 rng(static_cast<unsigned>(::getpid()) ^ static_cast<unsigned>(start.time_since_epoch().count()));
  auto backoff = std::chrono::milliseconds(10);
  std::string last_error;
  int attempts = 0;
  auto next_status = start + options_.waiting_interval;
  for (;;) {
    ++attempts;
    try {
      use_stream(std::make_unique<BlockingSocket>(options_.host, options_.port, deadline), deadline);
      return;
    } catch (const ConnectionError& e) {
      last_error = e.what();
    } catch (const RefusedError& e) {
      if (!options_.retry_refused) throw;
      last_error = e.what();
    } catch (const ProtocolError& e) {
      last_error = e.what();
    } catch (const TimeoutError& e) {
      last_error = e.what();
    }
    if (socket_) socket_->close();
    socket_.reset();
    const auto now = Clock::now();
    if (now >= deadline) break;
    if (options_.on_waiting && now >= next_status) {
      next_status = now + options_.waiting_interval;
      const auto waited = std::chrono::duration_cast<std::chrono::seconds>(now - start);
      options_.on_waiting("still waiting for the store at " + format_endpoint(options_.host, options_.port) +
                          " (node 0's launcher) after " + format_whole_seconds(waited) + "; last error: " + last_error);
    }
    // No event tells when a server starts listening, so retrying after a sleep is the only way:
    // exponential backoff with jitter, capped at 1 s and at the deadline.
    std::uniform_int_distribution<int> jitter(0, static_cast<int>(backoff.count() / 2));
    const auto pause = std::min<Clock::duration>(backoff + std::chrono::milliseconds(jitter(rng)), deadline - now);
    std::this_thread::sleep_for(pause);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
  const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  throw ConnectionError("could not reach the store at " + format_endpoint(options_.host, options_.port) + " after " +
                        std::to_string(attempts) + " attempts in " + std::to_string(elapsed.count()) +
                        " ms (last error: " + last_error +
                        "); check that the store (node 0's launcher) is running and that the "
                        "address and port are right");
}

void TcpStoreClient::use_stream(std::unique_ptr<StoreStream> stream, Clock::time_point deadline) {
  socket_ = std::move(stream);
  handshake(deadline);
  local_address_ = socket_->local_address();
  interruptible_ = socket_.get();
}

void TcpStoreClient::handshake(Clock::time_point deadline) {
  const auto nonce = static_cast<std::uint32_t>(::getpid());
  std::string hello = encode_request(make(QueryType::Validate, {}, {}, kValidationMagic));
  hello += encode_request(make(QueryType::Ping, {}, {}, nonce));
  socket_->write_all(hello, deadline);
  const std::string echo = socket_->read_exact(4, deadline);
  if (get_u32(echo.data()) == kRefusedAddressEcho) {  // never a nonce: pids stay below 2^22
    // The parenthesis only without a secret: with one, no stranger can have taken this node's place.
    throw RefusedError("the store at " + socket_->peer() + " refuses connections from this host (" +
                           socket_->local_address() +
                           "): the job's round formed without it; if this node was meant to be in it, another host "
                           "holds its place" +
                           (options_.auth.enabled()
                                ? std::string(", or this host's address changed")
                                : std::string(" (a job without a secret lets any host take it, see docs/security.md)")),
                       socket_->peer(), socket_->local_address());
  }
  if (get_u32(echo.data()) != nonce) {
    throw ProtocolError("store at " + socket_->peer() + " echoed a wrong PING nonce");
  }
  if (options_.auth.enabled() || options_.auth.expect_none) authenticate(deadline);
}

void TcpStoreClient::authenticate(Clock::time_point deadline) {
  socket_->write_all(encode_request(make(QueryType::Get, {std::string(kAuthChallengeKey)})), deadline);
  const std::string challenge = read_str(deadline);
  if (!options_.auth.enabled()) {
    if (challenge.empty()) return;
    throw AuthError("the store at " + socket_->peer() +
                    " serves launchers with a job secret only (node 0's launcher has one); give every node of the job "
                    "the same job secret (DDPLAUNCH_RDZV_TOKEN or --rdzv_conf token_file)");
  }
  if (challenge.empty()) {
    throw AuthError("the store at " + socket_->peer() +
                    " checks no job secret (node 0's launcher runs without one); give every node of the job the "
                    "same secret, or none");
  }
  socket_->write_all(encode_request(make(QueryType::CompareSet, {std::string(kAuthProofKey)},
                                         {challenge, options_.auth.prove(challenge)})),
                     deadline);
  if (read_str(deadline) != kAuthAccepted) {
    throw AuthError("the store at " + socket_->peer() +
                    " refused this launcher's job secret: node 0's launcher has another one; give every node of "
                    "the job the same job secret (DDPLAUNCH_RDZV_TOKEN or --rdzv_conf token_file)");
  }
}

Clock::time_point TcpStoreClient::reply_deadline() const {
  return deadline_after(options_.timeout);
}

std::string TcpStoreClient::read_str(Clock::time_point deadline) {
  const std::string len_bytes = socket_->read_exact(8, deadline);
  const auto len = static_cast<std::uint64_t>(get_i64(len_bytes.data()));
  if (len > kMaxReplyLength) {
    throw ProtocolError("store at " + socket_->peer() + " announced a reply of " + std::to_string(len) + " bytes");
  }
  return socket_->read_exact(static_cast<std::size_t>(len), deadline);
}

std::int64_t TcpStoreClient::read_i64(Clock::time_point deadline) {
  return get_i64(socket_->read_exact(8, deadline).data());
}

std::uint8_t TcpStoreClient::read_u8(Clock::time_point deadline) {
  return static_cast<std::uint8_t>(socket_->read_exact(1, deadline)[0]);
}

template <class F>
auto TcpStoreClient::locked(const char* what, F&& body) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!socket_) {
    throw ConnectionError("connection to the store at " + format_endpoint(options_.host, options_.port) +
                          " is broken (" + broken_reason_ + "); create a new client");
  }
  try {
    return body();
  } catch (const Error& e) {
    // The stream may hold unread bytes of this reply: never reuse it.
    broken_reason_ = std::string(what) + ": " + e.what();
    socket_->close();
    retired_socket_ = std::move(socket_);  // kept alive: interrupt() may still hold it
    throw;
  }
}

void TcpStoreClient::interrupt() {
  if (StoreStream* s = interruptible_.load()) s->interrupt();
}

bool TcpStoreClient::await_stop_waiting(const std::string& request, Duration timeout) {
  socket_->write_all(request, reply_deadline());
  const auto deadline = deadline_after(timeout);
  try {
    const std::uint8_t r = read_u8(deadline);
    if (r != static_cast<std::uint8_t>(WaitResponse::StopWaiting)) {
      throw ProtocolError("unexpected wait reply " + std::to_string(r) + " from " + socket_->peer());
    }
    return true;
  } catch (const TimeoutError&) {
    // Withdraw the wait so the connection stays in step: the server answers WAIT_CANCELED,
    // possibly after a STOP_WAITING that raced with the cancel. A 1-byte read that timed out
    // consumed nothing, so the stream is still aligned.
  }
  socket_->write_all(encode_request(make(QueryType::CancelWait)), reply_deadline());
  std::uint8_t r = read_u8(reply_deadline());
  if (r == static_cast<std::uint8_t>(WaitResponse::StopWaiting)) r = read_u8(reply_deadline());
  if (r != static_cast<std::uint8_t>(WaitResponse::WaitCanceled)) {
    throw ProtocolError("unexpected CANCEL_WAIT reply " + std::to_string(r) + " from " + socket_->peer());
  }
  return false;
}

std::vector<std::string> TcpStoreClient::wire_keys(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(wire(k));
  return out;
}

TimeoutError TcpStoreClient::wait_timeout(const char* what, const std::vector<std::string>& keys,
                                          Duration timeout) const {
  return TimeoutError("timed out after " + std::to_string(timeout.count()) + " ms in " + what + " for keys " +
                      describe_keys(keys) + " at the store " + format_endpoint(options_.host, options_.port) +
                      "; a peer may have failed before writing them, or the timeout is too short");
}

void TcpStoreClient::send(const Request& request) {
  socket_->write_all(encode_request(request), reply_deadline());
}

void TcpStoreClient::set(const std::string& key, const std::string& value) {
  locked("SET", [&] { send(make(QueryType::Set, {wire(key)}, {value})); });
}

std::string TcpStoreClient::get(const std::string& key, Duration timeout) {
  return multi_get({key}, timeout).front();
}

std::vector<std::string> TcpStoreClient::multi_get(const std::vector<std::string>& keys, Duration timeout) {
  auto values = locked("MULTI_GET", [&]() -> std::optional<std::vector<std::string>> {
    if (!await_stop_waiting(encode_request(make(QueryType::Wait, wire_keys(keys))), timeout)) {
      return std::nullopt;
    }
    // A single key uses GET, as PyTorch's client does; several use MULTI_GET.
    if (keys.size() == 1) {
      send(make(QueryType::Get, wire_keys(keys)));
    } else {
      send(make(QueryType::MultiGet, wire_keys(keys)));
    }
    std::vector<std::string> out;
    const auto deadline = reply_deadline();
    for (std::size_t i = 0; i < keys.size(); ++i) out.push_back(read_str(deadline));
    return out;
  });
  if (!values) throw wait_timeout("get", keys, timeout);
  return std::move(*values);
}

std::int64_t TcpStoreClient::add(const std::string& key, std::int64_t delta) {
  return locked("ADD", [&] {
    send(make(QueryType::Add, {wire(key)}, {}, delta));
    return read_i64(reply_deadline());
  });
}

std::string TcpStoreClient::compare_set(const std::string& key, const std::string& expected,
                                        const std::string& desired) {
  return locked("COMPARE_SET", [&] {
    send(make(QueryType::CompareSet, {wire(key)}, {expected, desired}));
    return read_str(reply_deadline());
  });
}

bool TcpStoreClient::check(const std::vector<std::string>& keys) {
  return locked("CHECK", [&] {
    send(make(QueryType::Check, wire_keys(keys)));
    const std::uint8_t r = read_u8(reply_deadline());
    if (r > 1) throw ProtocolError("unexpected CHECK reply " + std::to_string(r) + " from " + socket_->peer());
    return r == static_cast<std::uint8_t>(CheckResponse::Ready);
  });
}

void TcpStoreClient::wait(const std::vector<std::string>& keys, Duration timeout) {
  const bool ok = locked(
      "WAIT", [&] { return await_stop_waiting(encode_request(make(QueryType::Wait, wire_keys(keys))), timeout); });
  if (!ok) throw wait_timeout("wait", keys, timeout);
}

bool TcpStoreClient::delete_key(const std::string& key) {
  return locked("DELETE_KEY", [&] {
    send(make(QueryType::DeleteKey, {wire(key)}));
    return read_i64(reply_deadline()) == 1;
  });
}

std::int64_t TcpStoreClient::num_keys() {
  return locked("GETNUMKEYS", [&] {
    send(make(QueryType::GetNumKeys));
    return read_i64(reply_deadline());
  });
}

void TcpStoreClient::append(const std::string& key, const std::string& bytes) {
  locked("APPEND", [&] { send(make(QueryType::Append, {wire(key)}, {bytes})); });
}

void TcpStoreClient::multi_set(const std::vector<std::string>& keys, const std::vector<std::string>& values) {
  if (keys.size() != values.size()) {
    throw Error("multi_set got " + std::to_string(keys.size()) + " keys but " + std::to_string(values.size()) +
                " values; pass one value per key");
  }
  locked("MULTI_SET", [&] { send(make(QueryType::MultiSet, wire_keys(keys), values)); });
}

void TcpStoreClient::queue_push(const std::string& key, const std::string& value) {
  locked("QUEUE_PUSH", [&] { send(make(QueryType::QueuePush, {wire(key)}, {value})); });
}

std::optional<std::string> TcpStoreClient::pop_locked(const std::string& key) {
  send(make(QueryType::QueuePop, {wire(key)}));
  const auto deadline = reply_deadline();
  if (read_i64(deadline) <= 0) return std::nullopt;
  return read_str(deadline);
}

std::optional<std::string> TcpStoreClient::try_queue_pop(const std::string& key) {
  return locked("QUEUE_POP", [&] { return pop_locked(key); });
}

std::string TcpStoreClient::queue_pop(const std::string& key, Duration timeout) {
  const auto deadline = deadline_after(timeout);
  for (;;) {
    const auto left = std::chrono::duration_cast<Duration>(deadline - Clock::now());
    auto value = locked("QUEUE_POP", [&]() -> std::optional<std::optional<std::string>> {
      if (!await_stop_waiting(encode_request(make(QueryType::Wait, {wire(key)})), std::max(left, Duration(0)))) {
        return std::nullopt;
      }
      return pop_locked(key);
    });
    if (!value) throw wait_timeout("queue_pop", {key}, timeout);
    if (*value) return std::move(**value);
    // Another client popped the element between our wake-up and our pop: wait again.
  }
}

std::int64_t TcpStoreClient::queue_len(const std::string& key) {
  return locked("QUEUE_LEN", [&] {
    send(make(QueryType::QueueLen, {wire(key)}));
    return read_i64(reply_deadline());
  });
}

std::vector<std::string> TcpStoreClient::list_keys() {
  return locked("LIST_KEYS", [&] {
    send(make(QueryType::ListKeys));
    const auto deadline = reply_deadline();
    const std::int64_t n = read_i64(deadline);
    if (n < 0 || static_cast<std::uint64_t>(n) > kMaxKeyCount * 64) {
      throw ProtocolError("store at " + socket_->peer() + " announced " + std::to_string(n) + " keys");
    }
    std::vector<std::string> keys;
    for (std::int64_t i = 0; i < n; ++i) {
      std::string k = read_str(deadline);
      if (k.compare(0, options_.key_prefix.size(), options_.key_prefix) == 0) {
        keys.push_back(k.substr(options_.key_prefix.size()));
      }
    }
    return keys;
  });
}

void TcpStoreClient::barrier(const std::string& key, std::int64_t world_size, Duration timeout) {
  const bool ok = locked("BARRIER", [&] {
    return await_stop_waiting(encode_request(make(QueryType::Barrier, {wire(key)}, {}, world_size)), timeout);
  });
  if (!ok) throw wait_timeout("barrier", {key}, timeout);
}

std::chrono::microseconds TcpStoreClient::ping() {
  return locked("PING", [&] {
    const auto start = Clock::now();
    const auto nonce = static_cast<std::uint32_t>(start.time_since_epoch().count());
    send(make(QueryType::Ping, {}, {}, nonce));
    if (get_u32(socket_->read_exact(4, reply_deadline()).data()) != nonce) {
      throw ProtocolError("store at " + socket_->peer() + " echoed a wrong PING nonce");
    }
    return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start);
  });
}

}  // namespace ddp::rendezvous
