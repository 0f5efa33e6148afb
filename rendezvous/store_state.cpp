// Server state and query semantics; the waiting algorithm is spelled out in store_state.hpp.
#include "rendezvous/store_state.hpp"

#include <algorithm>

#include "ddplaunch/rendezvous/error.hpp"

namespace ddp::rendezvous {
namespace {

std::string byte_reply(std::uint8_t b) {
  return std::string(1, static_cast<char>(b));
}

std::string stop_waiting() {
  return byte_reply(static_cast<std::uint8_t>(WaitResponse::StopWaiting));
}

}  // namespace

std::vector<ClientId>& StoreState::park_on(WaiterTable& table, KeyRef key) {
  if (auto it = table.find(key); it != table.end()) return it->second;
  if (spare_nodes_.empty()) return table.emplace(StoredKey(key), std::vector<ClientId>()).first->second;
  WaiterTable::node_type node = std::move(spare_nodes_.back());
  spare_nodes_.pop_back();
  node.key().assign(key);  // reuses the node's key capacity
  node.mapped().clear();
  return table.insert(std::move(node)).position->second;
}

void StoreState::drop_entry(WaiterTable& table, WaiterTable::iterator it) {
  WaiterTable::node_type node = table.extract(it);
  // Kept only when small, so the spares hold a few KiB at most (they are not in stored_bytes).
  if (spare_nodes_.size() < kSpareNodes && node.mapped().capacity() <= kSpareNodes &&
      node.key().bytes.capacity() <= kSpareKeyBytes) {
    spare_nodes_.push_back(std::move(node));
  }
}

void StoreState::erase_id(WaiterTable& table, KeyRef key, ClientId id) {
  auto it = table.find(key);
  if (it == table.end()) return;
  auto& ids = it->second;
  ids.erase(std::remove(ids.begin(), ids.end(), id), ids.end());
  if (ids.empty()) drop_entry(table, it);
}

void StoreState::connect(ClientId id) {
  disconnect(id);  // a reused id starts afresh, without the old connection's parked waits
  clients_[id] = Client{};
}

StoreState::Client& StoreState::client(ClientId id) {
  auto it = clients_.find(id);
  DDP_ASSERT(it != clients_.end(), "request from unregistered client " + std::to_string(id));
  return it->second;
}

std::size_t StoreState::num_waiting() const {
  return static_cast<std::size_t>(std::count_if(
      clients_.begin(), clients_.end(), [](const auto& kv) { return kv.second.missing > 0 || kv.second.in_barrier; }));
}

bool StoreState::present(KeyRef key) const {
  if (kv_.contains(key)) return true;
  if (queues_.empty()) return false;
  auto it = queues_.find(key);
  return it != queues_.end() && !it->second.empty();
}

void StoreState::disconnect(ClientId id) {
  auto it = clients_.find(id);
  if (it == clients_.end()) return;
  unpark(id, it->second);
  clients_.erase(it);
}

void StoreState::unpark(ClientId id, Client& c) {
  for (const auto& key : c.parked_on) erase_id(c.in_barrier ? barrier_waiters_ : waiters_, key, id);
  c.parked_on.clear();
  c.missing = 0;
  c.in_barrier = false;
}

void StoreState::wake(KeyRef key, bool only_one, std::vector<Outgoing>& out) {
  if (waiters_.empty()) return;
  auto it = waiters_.find(key);
  if (it == waiters_.end()) return;
  woken_.clear();
  if (only_one) {
    woken_.push_back(it->second.front());
    it->second.erase(it->second.begin());
    if (it->second.empty()) drop_entry(waiters_, it);
  } else {
    woken_.swap(it->second);
    drop_entry(waiters_, it);
  }
  for (ClientId id : woken_) {
    Client& c = client(id);
    DDP_ASSERT(c.missing > 0, "woken client " + std::to_string(id) + " had no pending wait");
    if (--c.missing == 0) {
      c.parked_on.clear();
      out.push_back({id, stop_waiting()});
    } else {  // a WAIT on several keys: only this one is off its list
      c.parked_on.erase(std::remove(c.parked_on.begin(), c.parked_on.end(), key.bytes()), c.parked_on.end());
    }
  }
}

void StoreState::start_wait(ClientId id, Client& c, const std::vector<std::string>& keys, KeyRef first,
                            std::vector<Outgoing>& out) {
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const KeyRef key = i == 0 ? first : KeyRef(keys[i]);
    // A key named twice counts once, so one SET of it completes the wait.
    if (present(key) || std::find(c.parked_on.begin(), c.parked_on.end(), key.bytes()) != c.parked_on.end()) {
      continue;
    }
    c.parked_on.push_back(keys[i]);
    park_on(waiters_, key).push_back(id);
  }
  c.missing = c.parked_on.size();
  if (c.missing == 0) out.push_back({id, stop_waiting()});
}

void StoreState::start_barrier(ClientId id, Client& c, KeyRef key, std::int64_t world, std::vector<Outgoing>& out) {
  const std::int64_t count = kv_.add(key, 1);
  if (count < world) {
    c.in_barrier = true;
    c.parked_on.emplace_back(key.bytes());
    park_on(barrier_waiters_, key).push_back(id);
  } else {
    out.push_back({id, stop_waiting()});
    auto it = barrier_waiters_.find(key);
    if (it != barrier_waiters_.end()) {
      const std::vector<ClientId> done = std::move(it->second);
      drop_entry(barrier_waiters_, it);
      for (ClientId other : done) {
        Client& oc = client(other);
        oc.parked_on.clear();
        oc.in_barrier = false;
        out.push_back({other, stop_waiting()});
      }
    }
  }
  wake(key, false, out);
}

bool StoreState::proven(ClientId id) const {
  const auto it = clients_.find(id);
  return it != clients_.end() && it->second.proven;
}

bool StoreState::handshake(ClientId id, const Request& r) const {
  if (!auth_.enabled() || r.keys.size() != 1) return false;
  const bool step = (r.type == QueryType::Get && r.keys[0] == kAuthChallengeKey) ||
                    (r.type == QueryType::CompareSet && r.keys[0] == kAuthProofKey);
  if (!step) return false;
  const auto it = clients_.find(id);
  if (it == clients_.end() || it->second.proven) return false;
  // A proof answers the challenge outstanding; a challenge is free up to the count.
  return r.type == QueryType::CompareSet ? !it->second.challenge.empty() : it->second.challenges < kMaxFreeChallenges;
}

bool StoreState::is_protected(const std::string& key) const {
  return key.compare(0, auth_.protected_prefix.size(), auth_.protected_prefix) == 0;
}

bool StoreState::authenticate(ClientId id, Client& c, Request& r, std::vector<Outgoing>& out) {
  if (!auth_.enabled() || r.keys.size() != 1) return false;
  std::string reply;
  if (r.type == QueryType::Get && r.keys[0] == kAuthChallengeKey) {
    c.challenge = new_auth_challenge();
    ++c.challenges;
    put_str(reply, c.challenge);
  } else if (r.type == QueryType::CompareSet && r.keys[0] == kAuthProofKey) {
    const bool ok = !c.challenge.empty() && r.values[0] == c.challenge &&
                    equal_in_constant_time(r.values[1], auth_.prove(c.challenge));
    c.challenge.clear();  // one proof per challenge
    c.proven = c.proven || ok;
    put_str(reply, ok ? kAuthAccepted : kAuthDenied);
  } else {
    return false;
  }
  out.push_back({id, std::move(reply)});
  return true;
}

std::vector<std::string> StoreState::visible_keys(const Client& c) const {
  auto keys = kv_.keys();
  if (auth_.enabled() && !c.proven) {
    keys.erase(std::remove_if(keys.begin(), keys.end(), [&](const auto& k) { return is_protected(k); }), keys.end());
  }
  return keys;
}

void StoreState::check_access(const Client& c, const Request& r) const {
  if (!auth_.enabled() || c.proven) return;
  for (const auto& key : r.keys) {
    if (is_protected(key)) {
      throw ProtocolError(std::string(query_name(r.type)) +
                          " of a launcher key without the job secret (only the job's launchers may touch '" +
                          auth_.protected_prefix + "...')");
    }
  }
}

void StoreState::handle(ClientId id, Request&& r, std::size_t key_hash, std::vector<Outgoing>& out) {
  Client& c = client(id);
  if (!c.validated && r.type != QueryType::Validate) {
    throw ProtocolError("first request is " + std::string(query_name(r.type)) +
                        ", expected the VALIDATE handshake (is this a TCPStore client of "
                        "PyTorch 2.x?)");
  }
  if (authenticate(id, c, r, out)) return;
  check_access(c, r);
  // The first key, hashed once by the caller (key_hash); only read where the request has one.
  const KeyRef key = r.keys.empty() ? KeyRef(std::string_view(), 0) : KeyRef(r.keys[0], key_hash);
  // Every type is named (no default), so -Wswitch points here at a new one until it has a group.
  switch (r.type) {
    case QueryType::Validate:
      if (static_cast<std::uint32_t>(r.integer) != kValidationMagic) {
        throw ProtocolError("VALIDATE with wrong magic " + std::to_string(static_cast<std::uint32_t>(r.integer)));
      }
      c.validated = true;
      return;
    case QueryType::Set:
    case QueryType::CompareSet:
    case QueryType::Add:
    case QueryType::Append:
    case QueryType::MultiSet:
    case QueryType::DeleteKey:
      return handle_write(id, r, key, out);
    case QueryType::Ping:
    case QueryType::Get:
    case QueryType::Check:
    case QueryType::GetNumKeys:
    case QueryType::MultiGet:
    case QueryType::ListKeys:
      return handle_read(id, c, r, key, out);
    case QueryType::Wait:
    case QueryType::Barrier:
    case QueryType::CancelWait:
      return handle_wait(id, c, r, key, out);
    case QueryType::QueuePush:
    case QueryType::QueuePop:
    case QueryType::QueueLen:
      return handle_queue(id, r, key, out);
  }
}

void StoreState::handle_write(ClientId id, Request& r, KeyRef key, std::vector<Outgoing>& out) {
  std::string reply;
  switch (r.type) {
    case QueryType::Set:
      kv_.set(key, std::move(r.values[0]));
      wake(key, false, out);
      return;
    case QueryType::CompareSet: {
      bool changed = false;
      const std::string current = kv_.compare_set(key, r.values[0], std::move(r.values[1]), changed);
      put_str(reply, current);
      out.push_back({id, std::move(reply)});
      if (changed) wake(key, false, out);
      return;
    }
    case QueryType::Add:
      put_i64(reply, kv_.add(key, r.integer));
      out.push_back({id, std::move(reply)});
      wake(key, false, out);
      return;
    case QueryType::Append:
      kv_.append(key, r.values[0]);
      wake(key, false, out);
      return;
    case QueryType::MultiSet:
      for (std::size_t i = 0; i < r.keys.size(); ++i) {
        const KeyRef k = i == 0 ? key : KeyRef(r.keys[i]);
        kv_.set(k, std::move(r.values[i]));
        wake(k, false, out);
      }
      return;
    case QueryType::DeleteKey:
      put_i64(reply, kv_.erase(key) ? 1 : 0);
      out.push_back({id, std::move(reply)});
      return;
    default:
      DDP_ASSERT(false, std::string(query_name(r.type)) + " is not a write");
  }
}

void StoreState::handle_read(ClientId id, const Client& c, const Request& r, KeyRef key,
                             std::vector<Outgoing>& out) const {
  std::string reply;
  switch (r.type) {
    case QueryType::Ping:
      put_u32(reply, static_cast<std::uint32_t>(r.integer));
      break;
    case QueryType::Get: {
      // A missing key gets an empty value, as in PyTorch's libuv server; real clients WAIT first.
      const std::string* v = kv_.find(key);
      put_str(reply, v ? std::string_view(*v) : std::string_view());
      break;
    }
    case QueryType::Check: {
      const bool ready = std::all_of(r.keys.begin(), r.keys.end(), [&](const auto& k) { return present(k); });
      reply = byte_reply(static_cast<std::uint8_t>(ready ? CheckResponse::Ready : CheckResponse::NotReady));
      break;
    }
    case QueryType::GetNumKeys:
      // A stranger learns nothing of the launchers' keys, as from LIST_KEYS.
      put_i64(reply, static_cast<std::int64_t>(auth_.enabled() && !c.proven
                                                   ? kv_.size() - kv_.count_with_prefix(auth_.protected_prefix)
                                                   : kv_.size()));
      break;
    case QueryType::MultiGet:
      for (const auto& k : r.keys) {
        const std::string* v = kv_.find(k);
        put_str(reply, v ? std::string_view(*v) : std::string_view());
      }
      break;
    case QueryType::ListKeys: {
      const auto keys = visible_keys(c);
      put_i64(reply, static_cast<std::int64_t>(keys.size()));
      for (const auto& k : keys) put_str(reply, k);
      break;
    }
    default:
      DDP_ASSERT(false, std::string(query_name(r.type)) + " is not a read");
  }
  out.push_back({id, std::move(reply)});
}

void StoreState::handle_wait(ClientId id, Client& c, const Request& r, KeyRef key, std::vector<Outgoing>& out) {
  if (r.type == QueryType::CancelWait) {
    unpark(id, c);
    out.push_back({id, byte_reply(static_cast<std::uint8_t>(WaitResponse::WaitCanceled))});
    return;
  }
  if (c.missing > 0 || c.in_barrier) {
    throw ProtocolError(std::string(query_name(r.type)) +
                        " while an earlier WAIT or BARRIER of this connection is pending");
  }
  if (r.type == QueryType::Wait) {
    start_wait(id, c, r.keys, key, out);
  } else {
    start_barrier(id, c, key, r.integer, out);
  }
}

void StoreState::handle_queue(ClientId id, Request& r, KeyRef key, std::vector<Outgoing>& out) {
  if (r.type == QueryType::QueuePush) {
    push_queue(key, std::move(r.values[0]));
    wake(key, true, out);
    return;
  }
  std::string reply;
  auto it = queues_.find(key);
  const std::size_t len = it == queues_.end() ? 0 : it->second.size();
  put_i64(reply, static_cast<std::int64_t>(len));
  if (r.type == QueryType::QueuePop && len > 0) {
    put_str(reply, it->second.front());
    pop_queue(it);
  }
  out.push_back({id, std::move(reply)});
}

}  // namespace ddp::rendezvous
