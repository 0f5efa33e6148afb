// The key-value semantics shared by the TCP server's state and the in-memory store: counters as
// decimal text, COMPARE_SET's four cases, append. No waiting, no locking: callers add those.
// It counts the memory it holds (bytes()), so the server can keep the store within a budget.
// Keys are taken as KeyRef (key_ref.hpp): a string converts and is hashed on the spot; a caller
// that looks one key up several times hashes it once and passes the KeyRef.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ddplaunch/rendezvous/key_ref.hpp"

namespace ddp::rendezvous {

class KeyValueMap {
 public:
  // nullptr when the key is missing. The pointer is valid until the next mutation.
  const std::string* find(KeyRef key) const;
  bool contains(KeyRef key) const { return map_.find(key) != map_.end(); }

  void set(KeyRef key, std::string value);
  // Throws ProtocolError (naming the key and the sizes) when the value would grow past
  // kMaxValueLength (rendezvous/protocol.hpp); the map is then unchanged.
  void append(KeyRef key, std::string_view bytes);

  // Adds `delta` to the counter under `key` (0 when missing), stores the result as decimal text
  // and returns it. Throws ProtocolError when the stored value is not a decimal int64.
  std::int64_t add(KeyRef key, std::int64_t delta);

  // COMPARE_SET as PyTorch's servers do it:
  //   missing,  expected == ""  → store desired, return desired
  //   missing,  expected != ""  → no change, return expected (sic; callers cannot tell)
  //   present,  value == expected → store desired, return desired
  //   present,  value != expected → no change, return the current value
  // `changed` tells whether the map was written.
  std::string compare_set(KeyRef key, const std::string& expected, std::string desired, bool& changed);

  bool erase(KeyRef key);
  std::size_t size() const { return map_.size(); }
  std::vector<std::string> keys() const;
  // How many keys start with `prefix`. O(keys), without allocating.
  std::size_t count_with_prefix(std::string_view prefix) const;

  // Memory held, approximately and in the safe direction: per entry the key's and the value's
  // capacity plus kEntryOverhead (the hash node, the bucket, allocator rounding). O(1).
  std::size_t bytes() const { return bytes_; }
  static constexpr std::size_t kEntryOverhead = 128;
  static std::size_t entry_bytes(const std::string& key, const std::string& value) {
    return key.capacity() + value.capacity() + kEntryOverhead;
  }
  static std::size_t entry_bytes(const StoredKey& key, const std::string& value) {
    return entry_bytes(key.bytes, value);
  }
  // The capacity a value of `capacity` gets when it must hold `need` bytes after an APPEND:
  // doubling (so repeated small appends stay linear), never past kMaxValueLength.
  static std::size_t grown_capacity(std::size_t capacity, std::size_t need);

 private:
  // Replaces the entry's count in bytes_ after `change` ran on the entry at `it`.
  using Map = KeyTable<std::string>;
  template <typename Change>
  void update(Map::iterator it, Change change);
  // The entry of `key`, made empty when missing (and counted in bytes_).
  Map::iterator entry(KeyRef key);

  Map map_;
  std::size_t bytes_ = 0;
};

}  // namespace ddp::rendezvous
