// See etcd_client.hpp.
#include "launcher/etcd/etcd_client.hpp"

#include <sodium.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <thread>

#include <fmt/format.h>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "common/host_port.hpp"
#include "ddplaunch/rendezvous/error.hpp"
#include "ddplaunch/rendezvous/store.hpp"

namespace ddp::launcher {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string b64(const std::string& bytes) {
  std::string out(sodium_base64_encoded_len(bytes.size(), sodium_base64_VARIANT_ORIGINAL), '\0');
  sodium_bin2base64(out.data(), out.size(), reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(),
                    sodium_base64_VARIANT_ORIGINAL);
  out.resize(out.size() - 1);  // the terminating NUL
  return out;
}

std::string unb64(const std::string& text) {
  std::string out(text.size(), '\0');
  std::size_t length = 0;
  if (sodium_base642bin(reinterpret_cast<unsigned char*>(out.data()), out.size(), text.data(), text.size(), nullptr,
                        &length, nullptr, sodium_base64_VARIANT_ORIGINAL) != 0)
    throw EtcdError("etcd sent a value that is not base64: '" + text.substr(0, 40) + "'");
  out.resize(length);
  return out;
}

// The gateway writes int64 fields as strings and leaves out zero values.
std::int64_t i64(const json& j, const char* field) {
  const auto it = j.find(field);
  if (it == j.end() || it->is_null()) return 0;
  if (it->is_number_integer()) return it->get<std::int64_t>();
  return parse_etcd_int(fmt::format("field '{}'", field), it->is_string() ? it->get<std::string>() : it->dump());
}

// The end of the range of keys starting with `prefix` (etcd's "range_end": prefix + 1).
std::string prefix_end(std::string prefix) {
  while (!prefix.empty()) {
    auto& last = reinterpret_cast<unsigned char&>(prefix.back());
    if (last < 0xff) {
      ++last;
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');  // every key
}

EtcdKeyValue key_value(const json& kv) {
  EtcdKeyValue out;
  out.key = unb64(kv.value("key", ""));
  out.value = unb64(kv.value("value", ""));
  out.create_revision = i64(kv, "create_revision");
  out.mod_revision = i64(kv, "mod_revision");
  out.lease = i64(kv, "lease");
  return out;
}

json parse(const std::string& body, const std::string& what) {
  try {
    return json::parse(body);
  } catch (const json::exception&) {
    throw EtcdError(what + ": etcd's answer is not JSON: '" + body.substr(0, 200) + "'");
  }
}

json put_request(const std::string& key, const std::string& value, std::int64_t lease) {
  json put{{"key", b64(key)}, {"value", b64(value)}};
  if (lease != 0) put["lease"] = std::to_string(lease);
  return put;
}

// Runs one asynchronous operation to its end. Beast's tcp_stream applies its expiry only to
// asynchronous operations: they end with beast::error::timeout at the deadline, where a
// synchronous read would wait for ever on a member that accepted but never answers.
// With `interrupted`, a stop() of `io` by EtcdClient::interrupt() that came before the restart
// is not lost: the flag, set first, is read after it.
template <class Start>
beast::error_code await(boost::asio::io_context& io, Start start, const std::atomic<bool>* interrupted = nullptr) {
  beast::error_code result;
  start([&result](beast::error_code ec, auto&&...) { result = ec; });
  io.restart();
  if (interrupted != nullptr && interrupted->load()) return boost::asio::error::operation_aborted;
  io.run();
  return result;
}

// Connects to host:port and sends one POST; the caller reads the answer. The stream's expiry is
// the deadline. Returns the first error.
beast::error_code send_post(boost::asio::io_context& io, beast::tcp_stream& stream, const std::string& host,
                            const std::string& port, const std::string& path, const std::string& body,
                            const std::string& token, Clock::time_point deadline,
                            const std::atomic<bool>* interrupted = nullptr) {
  stream.expires_at(deadline);
  tcp::resolver resolver(io);
  beast::error_code ec;
  const auto addresses = resolver.resolve(host, port, ec);
  if (ec) return ec;
  ec = await(
      io, [&](auto handler) { stream.async_connect(addresses, std::move(handler)); }, interrupted);
  if (ec) return ec;
  http::request<http::string_body> request{http::verb::post, path, 11};
  request.set(http::field::host, host + ":" + port);
  request.set(http::field::content_type, "application/json");
  if (!token.empty()) request.set(http::field::authorization, token);
  request.body() = body;
  request.prepare_payload();
  return await(
      io, [&](auto handler) { http::async_write(stream, request, std::move(handler)); }, interrupted);
}

// A connection-level failure: the next member is tried.
struct Unreachable {
  std::string why;
};

// The members in turn, counted from the one that answered last (`preferred`, read at each turn: an
// authentication inside a call may move it), and what each said last (for the message when none
// answers: one entry per member, however often each was tried). A call goes round until its
// deadline, a watch once.
class MemberRotation {
 public:
  MemberRotation(std::size_t members, const std::size_t& preferred) : members_(members), preferred_(preferred) {}

  // The member to try now, an index into the client's endpoints.
  std::size_t index() const { return (preferred_ + tries_) % members_; }
  // Rounds every member has failed in so far.
  std::size_t rounds() const { return tries_ / members_; }
  // The member at index(), `where` (host:port), failed with `why`: the next one is tried. True
  // when that ends a round (every member has now failed once more).
  bool failed(const std::string& where, const std::string& why) {
    ++tries_;
    const auto same = [&](const auto& entry) { return entry.first == where; };
    if (const auto it = std::find_if(last_.begin(), last_.end(), same); it != last_.end())
      it->second = why;
    else
      last_.emplace_back(where, why);
    return tries_ % members_ == 0;
  }
  // "10.0.0.1:2379: Connection refused; 10.0.0.2:2379: no leader[, 6 tries]".
  std::string text() const {
    std::string out;
    for (const auto& [m, w] : last_) out += (out.empty() ? "" : "; ") + m + ": " + w;
    return out + (tries_ > last_.size() ? ", " + std::to_string(tries_) + " tries" : "");
  }

 private:
  std::size_t members_;
  const std::size_t& preferred_;
  std::size_t tries_ = 0;
  std::vector<std::pair<std::string, std::string>> last_;
};

}  // namespace

std::int64_t parse_etcd_int(std::string_view what, std::string_view text) {
  // Not std::stoll: it throws std::invalid_argument, and it passes leading blanks and trailing
  // garbage. A leading '+' is taken, as PyTorch's stores take it in a counter.
  const char* first = text.data() + (!text.empty() && text.front() == '+' ? 1 : 0);
  const char* last = text.data() + text.size();
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(first, last, value);
  if (ec != std::errc() || end != last || first == last) {
    throw EtcdError(fmt::format("etcd {} holds '{}', not a decimal integer (int64)", what, text.substr(0, 40)));
  }
  return value;
}

EtcdClient::EtcdClient(EtcdClientOptions options) : options_(std::move(options)) {
  if (sodium_init() < 0) throw EtcdError("libsodium failed to initialise");
  if (options_.endpoints.empty()) throw UsageError("no etcd endpoint; give --rdzv_endpoint HOST:2379[,HOST:2379...]");
  for (const std::string& e : options_.endpoints) {
    const HostPort member =
        parse_host_port(e, {.name = "etcd endpoint", .fix = "write it as 127.0.0.1:2379", .port_required = true});
    endpoints_.push_back({member.host, std::to_string(*member.port)});
  }
}

std::string EtcdClient::call(const std::string& path, const std::string& body) {
  const auto deadline = Clock::now() + options_.timeout;
  MemberRotation members(endpoints_.size(), preferred_);
  bool retried_auth = false;
  for (;;) {
    if (!options_.user.empty() && token_.empty() && path != "/v3/auth/authenticate") authenticate();
    const Endpoint& ep = endpoints_[members.index()];
    const std::string where = ep.host + ":" + ep.port;
    if (Clock::now() >= deadline)
      throw rendezvous::TimeoutError("etcd " + path + ": no member answered within " +
                                     std::to_string(options_.timeout.count()) + " ms (" + members.text() +
                                     "); check --rdzv_endpoint and that etcd runs");
    try {
      boost::asio::io_context io;
      beast::tcp_stream stream(io);
      // A member that accepts nothing (a cut link) may take only its share of the call's time, so
      // the others are still tried.
      const auto share = std::max<std::chrono::milliseconds>(options_.timeout / static_cast<int>(endpoints_.size()),
                                                             std::chrono::milliseconds(500));
      beast::error_code ec =
          send_post(io, stream, ep.host, ep.port, path, body, token_, std::min(deadline, Clock::now() + share));
      if (ec) throw Unreachable{ec.message()};
      beast::flat_buffer buffer;
      http::response<http::string_body> response;
      ec = await(io, [&](auto handler) { http::async_read(stream, buffer, response, std::move(handler)); });
      if (ec) throw Unreachable{ec.message()};
      local_address_ = stream.socket().local_endpoint(ec).address().to_string();
      stream.socket().shutdown(tcp::socket::shutdown_both, ec);
      if (response.result() == http::status::ok) {
        preferred_ = members.index();
        return response.body();
      }
      const json error = json::parse(response.body(), nullptr, false);
      const std::string message =
          error.is_object() ? error.value("message", error.value("error", response.body())) : response.body();
      // An expired token: authenticate again, once, and ask the same member.
      if (!options_.user.empty() && !retried_auth && message.find("auth token") != std::string::npos) {
        retried_auth = true;
        token_.clear();
        continue;
      }
      // "etcdserver: no leader" and the like: another member may serve the request.
      if (response.result_int() == 503 || message.find("no leader") != std::string::npos) throw Unreachable{message};
      if (message.find("authentication failed") != std::string::npos) {
        throw UsageError("etcd at " + where + ": authentication as user=" + options_.user + " failed (" + message +
                         "); check --rdzv_conf user= and the password (password_file= or DDPLAUNCH_ETCD_PASSWORD)");
      }
      if (message.find("user name is empty") != std::string::npos) {
        throw UsageError("etcd at " + where + " requires authentication (" + message +
                         "); give --rdzv_conf user=NAME,password_file=PATH");
      }
      throw EtcdError("etcd " + path + " at " + where + ": " + message);
    } catch (const Unreachable& u) {
      if (members.failed(where, u.why)) {
        // Every member failed in this round: pause before the next (a member may be starting;
        // nothing signals that it is up); the deadline bounds the whole call.
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      if (Clock::now() >= deadline)
        throw rendezvous::ConnectionError("etcd " + path + ": no member reachable (" + members.text() +
                                          "); check --rdzv_endpoint and that etcd runs");
    }
  }
}

void EtcdClient::authenticate() {
  const json answer =
      parse(call("/v3/auth/authenticate", json{{"name", options_.user}, {"password", options_.password}}.dump()),
            "authenticate");
  token_ = answer.value("token", "");
  if (token_.empty()) throw EtcdError("etcd authentication as '" + options_.user + "' returned no token");
}

std::int64_t EtcdClient::put(const std::string& key, const std::string& value, std::int64_t lease) {
  return i64(parse(call("/v3/kv/put", put_request(key, value, lease).dump()), "put").value("header", json::object()),
             "revision");
}

std::optional<EtcdKeyValue> EtcdClient::get(const std::string& key, std::int64_t* revision) {
  const json answer = parse(call("/v3/kv/range", json{{"key", b64(key)}}.dump()), "get");
  if (revision != nullptr) *revision = i64(answer.value("header", json::object()), "revision");
  const auto kvs = answer.find("kvs");
  if (kvs == answer.end() || kvs->empty()) return std::nullopt;
  return key_value(kvs->front());
}

std::vector<EtcdKeyValue> EtcdClient::get_prefix(const std::string& prefix, std::int64_t* revision) {
  const json answer =
      parse(call("/v3/kv/range", json{{"key", b64(prefix)}, {"range_end", b64(prefix_end(prefix))}}.dump()), "get");
  if (revision != nullptr) *revision = i64(answer.value("header", json::object()), "revision");
  std::vector<EtcdKeyValue> out;
  for (const json& kv : answer.value("kvs", json::array())) out.push_back(key_value(kv));
  return out;
}

bool EtcdClient::create(const std::string& key, const std::string& value, std::int64_t lease,
                        std::optional<EtcdKeyValue>* current) {
  const json txn{
      {"compare",
       json::array({{{"key", b64(key)}, {"target", "CREATE"}, {"result", "EQUAL"}, {"create_revision", "0"}}})},
      {"success", json::array({{{"request_put", put_request(key, value, lease)}}})},
      {"failure", json::array({{{"request_range", {{"key", b64(key)}}}}})}};
  const json answer = parse(call("/v3/kv/txn", txn.dump()), "create");
  const bool written = answer.value("succeeded", false);
  if (!written && current != nullptr) {
    *current = std::nullopt;
    for (const json& r : answer.value("responses", json::array())) {
      const json range = r.value("response_range", json::object());
      const json kvs = range.value("kvs", json::array());
      if (!kvs.empty()) *current = key_value(kvs.front());
    }
  }
  return written;
}

bool EtcdClient::compare_and_swap(const std::string& key, std::int64_t expected_revision, const std::string& value,
                                  std::int64_t lease) {
  const json txn{{"compare", json::array({{{"key", b64(key)},
                                           {"target", "MOD"},
                                           {"result", "EQUAL"},
                                           {"mod_revision", std::to_string(expected_revision)}}})},
                 {"success", json::array({{{"request_put", put_request(key, value, lease)}}})}};
  return parse(call("/v3/kv/txn", txn.dump()), "compare_and_swap").value("succeeded", false);
}

bool EtcdClient::remove(const std::string& key) {
  return i64(parse(call("/v3/kv/deleterange", json{{"key", b64(key)}}.dump()), "remove"), "deleted") > 0;
}

std::int64_t EtcdClient::grant_lease(std::chrono::seconds ttl) {
  const json answer = parse(call("/v3/lease/grant", json{{"TTL", std::to_string(ttl.count())}}.dump()), "grant");
  const std::int64_t id = i64(answer, "ID");
  if (id == 0) throw EtcdError("etcd granted no lease: " + answer.value("error", answer.dump()));
  return id;
}

std::int64_t EtcdClient::keep_alive(std::int64_t lease) {
  // A streaming call on the gateway: one request message, one result (then the stream ends).
  const std::string body = call("/v3/lease/keepalive", json{{"ID", std::to_string(lease)}}.dump());
  const json answer = parse(body.substr(0, body.find('\n')), "keep_alive");
  return i64(answer.value("result", json::object()), "TTL");
}

void EtcdClient::revoke(std::int64_t lease) {
  try {
    call("/v3/lease/revoke", json{{"ID", std::to_string(lease)}}.dump());
  } catch (const EtcdError& e) {
    if (std::string(e.what()).find("lease not found") == std::string::npos) throw;
  }
}

std::vector<EtcdEvent> EtcdClient::watch(const std::string& key, bool prefix, std::int64_t after_revision,
                                         std::chrono::milliseconds timeout) {
  json create{{"key", b64(key)}, {"start_revision", std::to_string(after_revision + 1)}};
  if (prefix) create["range_end"] = b64(prefix_end(key));
  const std::string body = json{{"create_request", create}}.dump();
  if (!options_.user.empty() && token_.empty()) authenticate();
  const auto deadline = rendezvous::deadline_after(timeout);
  MemberRotation members(endpoints_.size(), preferred_);
  while (members.rounds() == 0) {
    const Endpoint& ep = endpoints_[members.index()];
    boost::asio::io_context io;
    // interrupt() stops this io_context; every await below then returns and the flag is checked.
    struct Watching {
      EtcdClient& client;
      Watching(EtcdClient& c, boost::asio::io_context& io) : client(c) {
        std::lock_guard<std::mutex> lock(client.watching_mutex_);
        client.watching_ = &io;
      }
      ~Watching() {
        std::lock_guard<std::mutex> lock(client.watching_mutex_);
        client.watching_ = nullptr;
      }
    } watching(*this, io);
    const auto check_interrupted = [this] {
      if (interrupted_) throw rendezvous::ConnectionError("etcd watch: interrupted");
    };
    check_interrupted();
    beast::tcp_stream stream(io);
    beast::error_code ec = send_post(io, stream, ep.host, ep.port, "/v3/watch", body, token_, deadline, &interrupted_);
    check_interrupted();
    if (ec == beast::error::timeout) return {};
    if (ec) {
      members.failed(ep.host + ":" + ep.port, ec.message());
      continue;
    }
    // The answer is a stream of JSON messages, one per line: "created", then event batches.
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(64 * 1024 * 1024);
    std::size_t consumed = 0;
    for (;;) {
      ec = await(
          io, [&](auto handler) { http::async_read_some(stream, buffer, parser, std::move(handler)); }, &interrupted_);
      check_interrupted();
      if (ec == beast::error::timeout) return {};  // nothing changed before the timeout
      if (ec && ec != http::error::need_buffer) break;
      const std::string& text = parser.get().body();
      std::size_t newline;
      while ((newline = text.find('\n', consumed)) != std::string::npos) {
        const json message = parse(text.substr(consumed, newline - consumed), "watch");
        consumed = newline + 1;
        const json result = message.value("result", json::object());
        if (message.contains("error")) throw EtcdError("etcd watch: " + message["error"].value("message", ""));
        std::vector<EtcdEvent> events;
        for (const json& e : result.value("events", json::array())) {
          EtcdEvent event;
          event.deleted = e.value("type", "PUT") == "DELETE";
          event.kv = key_value(e.value("kv", json::object()));
          events.push_back(std::move(event));
        }
        if (!events.empty()) {
          preferred_ = members.index();
          return events;
        }
      }
      if (parser.is_done()) break;
    }
    members.failed(ep.host + ":" + ep.port, "watch ended: " + ec.message());
  }
  if (Clock::now() >= deadline) return {};
  throw rendezvous::ConnectionError("etcd watch: no member reachable (" + members.text() +
                                    "); check --rdzv_endpoint and that etcd runs");
}

void EtcdClient::interrupt() {
  interrupted_ = true;
  std::lock_guard<std::mutex> lock(watching_mutex_);
  if (watching_ != nullptr) watching_->stop();
}

}  // namespace ddp::launcher
