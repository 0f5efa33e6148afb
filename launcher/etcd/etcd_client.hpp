// A client of etcd's v3 API (issue 15's etcd rendezvous builds on it), through etcd's JSON gateway
// (grpc-gateway, POST /v3/...) over Boost.Beast, not gRPC: the gateway is part of every etcd v3
// server (3.4 and later serve it at /v3/), so this needs no generated code, no gRPC runtime and no
// protobuf (Debian's libgrpc++-dev would add all three to every launcher), and each call is one
// small HTTP request, which suits a rendezvous's few calls per second. Keys and values are bytes
// (base64 on the wire); revisions and lease ids are int64.
// Failover: each call tries the endpoints in order, starting with the last one that answered; a
// member that refuses or drops the connection or times out is skipped, and a call fails only when
// no member answered before the call's deadline. Authentication: with a user, the client gets a
// token (/v3/auth/authenticate) and sends it with every call, getting a new one when etcd says it
// expired. TLS: the client itself speaks plain HTTP; with TLS keys in --rdzv_conf the launcher
// starts ddplaunch-etcd-tls (etcd_tls_proxy.hpp) and gives the client the proxy's loopback ports
// as its endpoints, one per member, so failover works the same.
// Errors: EtcdError (a ddp::Error) naming the endpoint(s), the call and etcd's own message, or
// the field and the text of an answer that is not what etcd sends; an unreachable cluster is
// rendezvous::ConnectionError, a deadline rendezvous::TimeoutError, and wrong or missing
// credentials UsageError (naming the --rdzv_conf keys to fix).
// Thread-safety: one client per thread (the token and the preferred member are not guarded),
// except interrupt(), which any thread may call.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ddplaunch/common/error.hpp"

namespace boost::asio {
class io_context;
}

namespace ddp::launcher {

class EtcdError : public Error {
 public:
  using Error::Error;
};

// A decimal int64 that etcd sent or holds (a revision, a lease id, a counter's value); `what`
// names it for the message ("key 'r0/count'", "field 'revision'"). A leading '+' is taken (as a
// counter's value in PyTorch's stores); blanks or anything else around the digits are not.
// Pure. Throws EtcdError "etcd WHAT holds 'TEXT', not a decimal integer (int64)" (the text cut
// to 40 bytes).
std::int64_t parse_etcd_int(std::string_view what, std::string_view text);

struct EtcdClientOptions {
  std::vector<std::string> endpoints;                           // "host:port", e.g. "127.0.0.1:2379"; tried in order
  std::chrono::milliseconds timeout{std::chrono::seconds(10)};  // per call, all members included
  std::string user;                                             // empty: no authentication
  std::string password;
};

struct EtcdKeyValue {
  std::string key;
  std::string value;
  std::int64_t create_revision = 0;
  std::int64_t mod_revision = 0;
  std::int64_t lease = 0;
};

struct EtcdEvent {
  bool deleted = false;  // a DELETE (or a lease's expiry); else a PUT
  EtcdKeyValue kv;
};

class EtcdClient {
 public:
  // Does not connect (the first call does). Throws UsageError for an empty or malformed endpoint.
  explicit EtcdClient(EtcdClientOptions options);

  // Each call blocks up to options.timeout and throws as the header says.
  // Writes key = value, attached to `lease` (0: none). Returns the store's revision after it.
  std::int64_t put(const std::string& key, const std::string& value, std::int64_t lease = 0);
  // The key's current value, nullopt when absent; *revision: the store's revision it was read at.
  std::optional<EtcdKeyValue> get(const std::string& key, std::int64_t* revision = nullptr);
  // Every key starting with `prefix`, in key order, and the store's revision they were read at.
  std::vector<EtcdKeyValue> get_prefix(const std::string& prefix, std::int64_t* revision = nullptr);
  // A transaction: writes key = value (with `lease`) only if the key does not exist. Returns true
  // when it wrote; otherwise false and the holder's value in *current.
  bool create(const std::string& key, const std::string& value, std::int64_t lease = 0,
              std::optional<EtcdKeyValue>* current = nullptr);
  // A transaction: writes key = value only if its mod_revision is still `expected_revision`
  // (compare-and-swap; 0 means absent). Returns whether it wrote.
  bool compare_and_swap(const std::string& key, std::int64_t expected_revision, const std::string& value,
                        std::int64_t lease = 0);
  // Deletes the key; returns whether it existed.
  bool remove(const std::string& key);

  // A lease of `ttl` seconds; keys put with it vanish when it is not kept alive.
  std::int64_t grant_lease(std::chrono::seconds ttl);
  // Refreshes the lease once; returns its TTL afterwards (0: it had already expired).
  std::int64_t keep_alive(std::int64_t lease);
  // Ends the lease and deletes its keys. Revoking an expired lease is not an error.
  void revoke(std::int64_t lease);

  // Waits for changes to `key` (or every key under it when `prefix`) at revisions after
  // `after_revision`, up to `timeout`: returns the first batch of events, or an empty vector at
  // the timeout. An event, not a poll: etcd's watch streams them as they happen.
  // A timeout of milliseconds::max() waits for ever. Throws rendezvous::ConnectionError after
  // interrupt().
  std::vector<EtcdEvent> watch(const std::string& key, bool prefix, std::int64_t after_revision,
                               std::chrono::milliseconds timeout);

  // Makes a watch blocked in another thread (and every later one) throw ConnectionError at once.
  // Thread-safe, non-blocking. Other calls are bounded by options.timeout and are not affected.
  void interrupt();
  // The local IP address of the last connection to a member ("" before the first call): the
  // address the other nodes can reach this one at when they reach the same etcd.
  std::string local_address() const { return local_address_; }

 private:
  struct Endpoint {
    std::string host;
    std::string port;
  };
  // POSTs `body` (JSON text) to `path` on the first member that answers; returns the response body.
  std::string call(const std::string& path, const std::string& body);
  void authenticate();

  EtcdClientOptions options_;
  std::vector<Endpoint> endpoints_;
  std::size_t preferred_ = 0;
  std::string token_;
  std::string local_address_;
  std::atomic<bool> interrupted_{false};
  std::mutex watching_mutex_;
  boost::asio::io_context* watching_ = nullptr;  // the I/O of the watch in progress (guarded)
};

}  // namespace ddp::launcher
