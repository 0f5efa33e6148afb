// A store key with its hash computed once. One request touches its key in up to four tables (the
// memory cost check and the write read the key-value map, then the waiters and the queues are
// looked up); hashing the bytes each time was most of the per-request work after the syscalls.
//
// KeyRef views the bytes and carries their hash; StoredKey owns them and keeps the hash, so a
// table built with KeyHash and KeyEqual (KeyTable) looks a KeyRef up, inserts and rehashes
// without ever hashing the bytes again. The hash is std::hash<std::string_view>, as
// std::unordered_map<std::string, ...> used before.
//
// Plain values; thread-safe as values are (a KeyRef must not outlive the bytes it views).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace ddp::rendezvous {

class KeyRef {
 public:
  // Implicit, so that a string stands for its key wherever a KeyRef is taken; these hash.
  KeyRef(std::string_view bytes) : bytes_(bytes), hash_(std::hash<std::string_view>{}(bytes)) {}
  KeyRef(const std::string& bytes) : KeyRef(std::string_view(bytes)) {}
  KeyRef(const char* bytes) : KeyRef(std::string_view(bytes)) {}
  // `hash` must be the hash of `bytes` (as from an earlier KeyRef of the same bytes).
  KeyRef(std::string_view bytes, std::size_t hash) : bytes_(bytes), hash_(hash) {}

  std::string_view bytes() const { return bytes_; }
  std::size_t hash() const { return hash_; }

  friend bool operator==(const KeyRef& a, const KeyRef& b) { return a.hash_ == b.hash_ && a.bytes_ == b.bytes_; }

 private:
  std::string_view bytes_;
  std::size_t hash_;
};

// A table's own copy of a key, with the hash it was filed under.
struct StoredKey {
  std::string bytes;
  std::size_t hash = 0;

  explicit StoredKey(KeyRef key) : bytes(key.bytes()), hash(key.hash()) {}
  // Reuses this key's string capacity (a recycled table node).
  void assign(KeyRef key) {
    bytes.assign(key.bytes());
    hash = key.hash();
  }
  operator KeyRef() const { return KeyRef(bytes, hash); }
};

// Transparent hash and equality over KeyRef and StoredKey: lookups by KeyRef make no StoredKey.
struct KeyHash {
  using is_transparent = void;
  std::size_t operator()(const KeyRef& key) const noexcept { return key.hash(); }
  std::size_t operator()(const StoredKey& key) const noexcept { return key.hash; }
};
struct KeyEqual {
  using is_transparent = void;
  bool operator()(const KeyRef& a, const KeyRef& b) const noexcept { return a == b; }
};

template <typename T>
using KeyTable = std::unordered_map<StoredKey, T, KeyHash, KeyEqual>;

}  // namespace ddp::rendezvous
