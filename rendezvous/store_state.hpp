// The TCPStore server's whole state, without sockets: the key-value map, the queues, the
// connections' handshake progress and the waiters parked on keys and barriers.
//
// The server feeds it one parsed Request at a time per connection and sends whatever replies it
// produces. Because it is pure, every query's semantics (COMPARE_SET's cases, waking all waiters,
// CANCEL_WAIT always answered, waits dropped on disconnect, barriers) is tested without a socket.
//
// Waiting, step by step:
//   1. WAIT [k1..kn]: if every key is present (a key in the map, or a non-empty queue) reply
//      STOP_WAITING now. Otherwise park the connection on each missing key with a counter of
//      missing keys.
//   2. SET/ADD/APPEND/MULTI_SET/COMPARE_SET-that-wrote/BARRIER on a key decrements the counter of
//      every connection parked on it and unparks them from that key; at zero the connection gets
//      STOP_WAITING. QUEUE_PUSH does the same for the first parked connection only.
//   3. CANCEL_WAIT unparks the connection everywhere and always answers WAIT_CANCELED.
//   4. A disconnect unparks the connection everywhere; nothing is sent.
// BARRIER k n increments the decimal counter at k; the caller gets STOP_WAITING once the counter
// reaches n and so does every connection parked in that barrier; below n the caller is parked.
//
// Authentication (store_auth.hpp): with StoreAuth enabled, the handshake's GET and COMPARE_SET
// are answered here, and a request from an unproven connection that names a key under the
// protected prefix throws ProtocolError (the connection is closed); LIST_KEYS leaves those keys
// out for it, and GETNUMKEYS does not count them. Without it every connection may touch every
// key, as in PyTorch's server. The handshake's requests store nothing (handshake()), so the server
// answers them before, and whatever, its memory budget says.
//
// Memory: stored_bytes() counts what the map and the queues hold, and cost() bounds what one
// request would add, before it is applied, so the server can keep the store within its memory
// budget (memory_budget.hpp) without a request having allocated anything yet.
//
// Not thread-safe: one event loop (or one lock) owns it.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include "ddplaunch/rendezvous/key_ref.hpp"
#include "ddplaunch/rendezvous/key_value_map.hpp"
#include "ddplaunch/rendezvous/store_auth.hpp"
#include "rendezvous/request.hpp"

namespace ddp::rendezvous {

using ClientId = std::uint64_t;

// Bytes to send to one connection, in order.
struct Outgoing {
  ClientId client;
  std::string bytes;
};

// What one request may cost before it is applied (StoreState::cost): upper bounds.
struct RequestCost {
  std::size_t stored = 0;  // growth of stored_bytes()
  std::size_t reply = 0;   // bytes of the reply to its sender
};

class StoreState {
 public:
  explicit StoreState(StoreAuth auth = {}) : auth_(std::move(auth)) {}

  // Registers a new connection; its first request must be VALIDATE with the right magic.
  void connect(ClientId client);

  // Applies one request from `client` and appends the replies it causes (to the caller and to
  // woken waiters, in the order they must be sent) to `out`.
  // Throws ProtocolError when the request breaks the protocol for this connection (no or bad
  // VALIDATE, a second WAIT while one is pending, ADD on a non-numeric value); the caller closes
  // the connection and calls disconnect(). The state stays consistent after a throw.
  // The rvalue form takes the request's keys and values as it likes but leaves the vectors
  // themselves to the caller (the server reuses one Request per connection, without allocating).
  // `key_hash` is key_hash(request): the server computes it once for cost() and handle().
  void handle(ClientId client, Request&& request, std::size_t key_hash, std::vector<Outgoing>& out);
  void handle(ClientId client, Request&& request, std::vector<Outgoing>& out) {
    const std::size_t hash = key_hash(request);
    handle(client, std::move(request), hash, out);
  }
  void handle(ClientId client, const Request& request, std::vector<Outgoing>& out) {
    Request copy = request;
    handle(client, std::move(copy), out);
  }

  // The hash of the request's first key (KeyRef's), 0 for a request without keys. The hot
  // requests (SET, GET, ADD, WAIT of one key, DELETE) name one key, which cost() and handle()
  // then look up in three or four tables without hashing it again. Pure.
  static std::size_t key_hash(const Request& request) {
    return request.keys.empty() ? 0 : KeyRef(request.keys[0]).hash();
  }

  // Forgets the connection and every wait it had parked. Unknown ids are ignored.
  void disconnect(ClientId client);

  // Upper bounds of what handle(client, request) would add to stored_bytes() and of its reply
  // to `client` (woken waiters get one byte each, not counted here). Pure; O(keys of the
  // request), and O(keys in the store) for LIST_KEYS. Never throws.
  RequestCost cost(const Request& request, std::size_t key_hash) const;
  RequestCost cost(const Request& request) const { return cost(request, key_hash(request)); }
  // Memory held by the key-value map and the queues (KeyValueMap::bytes, plus per queue and
  // element fixed costs). O(1).
  std::size_t stored_bytes() const { return kv_.bytes() + queue_bytes_; }

  // Whether `client` passed the authentication handshake (false for unknown ids).
  bool proven(ClientId client) const;
  // Whether `request` is a step of the authentication handshake that `client` may take without
  // regard to the memory budget: with StoreAuth enabled, the challenge GET or the proof
  // COMPARE_SET of a connection not yet proven, among its first kMaxFreeChallenges challenges.
  // Such a request stores nothing and its reply is at most 40 bytes, so an exhausted budget can
  // never refuse a launcher's proof; past that count (no launcher asks twice) a request is costed
  // as any other. Pure; false for unknown ids.
  bool handshake(ClientId client, const Request& request) const;
  static constexpr int kMaxFreeChallenges = 4;

  std::size_t num_keys() const { return kv_.size(); }
  std::size_t num_clients() const { return clients_.size(); }
  // Connections with a WAIT or BARRIER pending. Counts every connection: O(connections).
  std::size_t num_waiting() const;
  // Keys at least one connection is parked on, WAIT keys and BARRIER keys counted apart. O(1).
  std::size_t num_parked_keys() const { return waiters_.size() + barrier_waiters_.size(); }

 private:
  struct Client {
    bool validated = false;
    // Keys still missing for the pending WAIT; 0 when nothing is pending.
    std::size_t missing = 0;
    std::vector<std::string> parked_on;  // keys (or barrier keys) it is parked on
    bool in_barrier = false;
    bool proven = false;    // passed the authentication handshake
    std::string challenge;  // issued and not used yet
    int challenges = 0;     // issued on this connection
  };

  Client& client(ClientId id);
  // handle()'s command groups, after the handshake and the access check; `key` is the first key
  // (KeyRef(keys[0], key_hash)). Each replies to `id` (and wakes waiters) in `out`.
  //   handle_write: SET, COMPARE_SET, ADD, APPEND, MULTI_SET, DELETE_KEY
  //   handle_read:  PING, GET, CHECK, GETNUMKEYS, MULTI_GET, LIST_KEYS
  //   handle_wait:  WAIT, BARRIER, CANCEL_WAIT
  //   handle_queue: QUEUE_PUSH, QUEUE_POP, QUEUE_LEN
  void handle_write(ClientId id, Request& r, KeyRef key, std::vector<Outgoing>& out);
  void handle_read(ClientId id, const Client& c, const Request& r, KeyRef key, std::vector<Outgoing>& out) const;
  void handle_wait(ClientId id, Client& c, const Request& r, KeyRef key, std::vector<Outgoing>& out);
  void handle_queue(ClientId id, Request& r, KeyRef key, std::vector<Outgoing>& out);
  bool present(KeyRef key) const;
  // `first` is keys[0] with its hash (the request's key_hash).
  void start_wait(ClientId id, Client& c, const std::vector<std::string>& keys, KeyRef first,
                  std::vector<Outgoing>& out);
  void start_barrier(ClientId id, Client& c, KeyRef key, std::int64_t world, std::vector<Outgoing>& out);
  // Wakes all (or, for a queue push, one) connection(s) parked on `key`.
  void wake(KeyRef key, bool only_one, std::vector<Outgoing>& out);
  void unpark(ClientId id, Client& c);
  // Answers the authentication handshake's requests; false when `r` is not one of them.
  bool authenticate(ClientId id, Client& c, Request& r, std::vector<Outgoing>& out);
  // Throws ProtocolError when an unproven connection names a protected key.
  void check_access(const Client& c, const Request& r) const;
  bool is_protected(const std::string& key) const;
  // The map's keys that `c` may see: all of them, or for an unproven connection with StoreAuth
  // enabled, those outside the protected prefix (LIST_KEYS, GETNUMKEYS). O(keys in the store).
  std::vector<std::string> visible_keys(const Client& c) const;

  // The waiter table's entries come and go with every WAIT (a fresh key per round in a
  // ping-pong): their nodes are kept for reuse instead of freed and allocated again.
  using WaiterTable = KeyTable<std::vector<ClientId>>;
  std::vector<ClientId>& park_on(WaiterTable& table, KeyRef key);
  void drop_entry(WaiterTable& table, WaiterTable::iterator it);
  void erase_id(WaiterTable& table, KeyRef key, ClientId id);
  static constexpr std::size_t kSpareNodes = 64;
  static constexpr std::size_t kSpareKeyBytes = 128;

  // Queue changes that keep queue_bytes_ in step.
  using QueueTable = KeyTable<std::deque<std::string>>;
  void push_queue(KeyRef key, std::string value);
  void pop_queue(QueueTable::iterator it);
  static constexpr std::size_t kQueueOverhead = 640;   // hash node, deque map and first block
  static constexpr std::size_t kElementOverhead = 32;  // the string's header in a deque block

  StoreAuth auth_;
  KeyValueMap kv_;
  QueueTable queues_;
  std::size_t queue_bytes_ = 0;
  std::unordered_map<ClientId, Client> clients_;
  WaiterTable waiters_;
  WaiterTable barrier_waiters_;
  std::vector<WaiterTable::node_type> spare_nodes_;  // emptied entries, for park_on
  std::vector<ClientId> woken_;                      // wake()'s scratch, kept for its capacity
};

}  // namespace ddp::rendezvous
