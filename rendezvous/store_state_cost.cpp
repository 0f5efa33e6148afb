// StoreState's memory accounting: the queues' byte count and the cost of a request before it is
// applied (store_state.hpp). Apart from store_state.cpp, whose handle() holds the semantics.
#include <algorithm>

#include "rendezvous/store_state.hpp"

namespace ddp::rendezvous {
namespace {

constexpr std::size_t kLength = 8;  // a u64 length or an i64 in a reply
// ADD and BARRIER store a decimal int64: at most 20 characters, in a string of some capacity.
constexpr std::size_t kCounterBytes = 32;

}  // namespace

void StoreState::push_queue(KeyRef key, std::string value) {
  auto it = queues_.find(key);
  if (it == queues_.end()) {
    it = queues_.emplace(StoredKey(key), std::deque<std::string>()).first;
    queue_bytes_ += it->first.bytes.capacity() + kQueueOverhead;
  }
  queue_bytes_ += value.capacity() + kElementOverhead;
  it->second.push_back(std::move(value));
}

void StoreState::pop_queue(QueueTable::iterator it) {
  queue_bytes_ -= it->second.front().capacity() + kElementOverhead;
  it->second.pop_front();
  if (!it->second.empty()) return;
  queue_bytes_ -= it->first.bytes.capacity() + kQueueOverhead;
  queues_.erase(it);
}

RequestCost StoreState::cost(const Request& r, std::size_t key_hash) const {
  RequestCost c{0, kLength};
  // The first key, hashed once by the caller; only read for requests that name one.
  const KeyRef key = r.keys.empty() ? KeyRef(std::string_view(), 0) : KeyRef(r.keys[0], key_hash);
  // A new key's entry at most (an existing one can only grow by the value's excess).
  const auto set_cost = [&](const std::string& bytes, KeyRef k, const std::string& value) -> std::size_t {
    const std::size_t next = KeyValueMap::entry_bytes(bytes, value);
    const std::string* old = kv_.find(k);
    const std::size_t prev = old ? KeyValueMap::entry_bytes(bytes, *old) : 0;
    return next > prev ? next - prev : 0;
  };
  const auto value_reply = [&](KeyRef k) {
    const std::string* v = kv_.find(k);
    return kLength + (v ? v->size() : 0);
  };
  switch (r.type) {
    case QueryType::Set:
    case QueryType::CompareSet:
      c.stored = set_cost(r.keys[0], key, r.values.back());
      if (r.type == QueryType::CompareSet) {
        c.reply = std::max(value_reply(key), kLength + std::max(r.values[0].size(), r.values[1].size()));
      }
      break;
    case QueryType::Add:
    case QueryType::Barrier:
      c.stored = kv_.contains(key) ? kCounterBytes : KeyValueMap::entry_bytes(r.keys[0], {}) + kCounterBytes;
      break;
    case QueryType::Append: {
      const std::string* v = kv_.find(key);
      const std::size_t capacity = v ? v->capacity() : 0;
      const std::size_t grown = KeyValueMap::grown_capacity(capacity, (v ? v->size() : 0) + r.values[0].size());
      c.stored = grown - capacity + (v ? 0 : KeyValueMap::entry_bytes(r.keys[0], {}));
      break;
    }
    case QueryType::MultiSet:
      for (std::size_t i = 0; i < r.keys.size(); ++i) {
        c.stored += set_cost(r.keys[i], i == 0 ? key : KeyRef(r.keys[i]), r.values[i]);
      }
      break;
    case QueryType::QueuePush:
      c.stored =
          r.values[0].capacity() + kElementOverhead + (queues_.count(key) ? 0 : r.keys[0].capacity() + kQueueOverhead);
      break;
    case QueryType::Get:
      c.reply = value_reply(key);
      break;
    case QueryType::MultiGet:
      c.reply = 0;
      for (std::size_t i = 0; i < r.keys.size(); ++i) c.reply += value_reply(i == 0 ? key : KeyRef(r.keys[i]));
      break;
    case QueryType::QueuePop: {
      auto it = queues_.find(key);
      c.reply = 2 * kLength + (it == queues_.end() || it->second.empty() ? 0 : it->second.front().size());
      break;
    }
    case QueryType::ListKeys:
      // Every key's length and bytes: within what the map counts for its entries, O(1).
      c.reply = kLength + kv_.size() * kLength + kv_.bytes();
      break;
    default:
      break;  // a fixed reply of at most 8 bytes, or none
  }
  return c;
}

}  // namespace ddp::rendezvous
