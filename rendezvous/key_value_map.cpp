// Key-value semantics; see key_value_map.hpp.
#include "ddplaunch/rendezvous/key_value_map.hpp"

#include <algorithm>
#include <charconv>

#include "ddplaunch/rendezvous/error.hpp"
#include "rendezvous/protocol.hpp"

namespace ddp::rendezvous {

template <typename Change>
void KeyValueMap::update(Map::iterator it, Change change) {
  bytes_ -= entry_bytes(it->first, it->second);
  change(it->second);
  bytes_ += entry_bytes(it->first, it->second);
}

KeyValueMap::Map::iterator KeyValueMap::entry(KeyRef key) {
  // Looked up first, so an existing key costs no StoredKey copy; a new one is filed under the
  // hash it came with (KeyHash), not hashed again.
  if (auto it = map_.find(key); it != map_.end()) return it;
  const auto it = map_.emplace(StoredKey(key), std::string()).first;
  bytes_ += entry_bytes(it->first, it->second);
  return it;
}

const std::string* KeyValueMap::find(KeyRef key) const {
  const auto it = map_.find(key);
  return it == map_.end() ? nullptr : &it->second;
}

void KeyValueMap::set(KeyRef key, std::string value) {
  update(entry(key), [&](std::string& v) { v = std::move(value); });
}

std::size_t KeyValueMap::grown_capacity(std::size_t capacity, std::size_t need) {
  if (need <= capacity) return capacity;
  return std::max(need, std::min(2 * capacity, kMaxValueLength));
}

void KeyValueMap::append(KeyRef key, std::string_view bytes) {
  const std::string* old = find(key);
  const std::size_t size = old ? old->size() : 0;
  if (bytes.size() > kMaxValueLength - std::min(size, kMaxValueLength)) {
    throw ProtocolError("APPEND of " + std::to_string(bytes.size()) + " bytes to key '" +
                        std::string(key.bytes().substr(0, 256)) + "' (" + std::to_string(size) +
                        " bytes) would pass the value limit of " + std::to_string(kMaxValueLength) + " bytes");
  }
  update(entry(key), [&](std::string& v) {
    v.reserve(grown_capacity(v.capacity(), v.size() + bytes.size()));
    v.append(bytes);
  });
}

std::int64_t KeyValueMap::add(KeyRef key, std::int64_t delta) {
  std::int64_t current = 0;
  auto it = map_.find(key);
  if (it != map_.end()) {
    const std::string& text = it->second;
    const char* first = text.data();
    const char* last = first + text.size();
    if (first != last && *first == '+') ++first;  // stoll, which PyTorch uses, accepts a '+'
    const auto [end, ec] = std::from_chars(first, last, current);
    if (ec != std::errc() || end != last || first == last) {
      throw ProtocolError("ADD on key '" + std::string(key.bytes()) + "' whose value is not a decimal integer (" +
                          std::to_string(text.size()) + " bytes)");
    }
  }
  // Wrap like the two's-complement arithmetic of PyTorch's servers instead of overflowing.
  const auto sum = static_cast<std::int64_t>(static_cast<std::uint64_t>(current) + static_cast<std::uint64_t>(delta));
  set(key, std::to_string(sum));
  return sum;
}

std::string KeyValueMap::compare_set(KeyRef key, const std::string& expected, std::string desired, bool& changed) {
  changed = false;
  auto it = map_.find(key);
  if (it == map_.end()) {
    if (!expected.empty()) return expected;
    changed = true;
    set(key, desired);
    return desired;
  }
  if (it->second != expected) return it->second;
  changed = true;
  std::string result = desired;
  // Moved, not copied: the entry takes the request's capacity, as StoreState::cost assumes.
  update(it, [&](std::string& v) { v = std::move(desired); });
  return result;
}

bool KeyValueMap::erase(KeyRef key) {
  auto it = map_.find(key);
  if (it == map_.end()) return false;
  bytes_ -= entry_bytes(it->first, it->second);
  map_.erase(it);
  return true;
}

std::vector<std::string> KeyValueMap::keys() const {
  std::vector<std::string> out;
  out.reserve(map_.size());
  for (const auto& kv : map_) out.push_back(kv.first.bytes);
  return out;
}

std::size_t KeyValueMap::count_with_prefix(std::string_view prefix) const {
  std::size_t n = 0;
  for (const auto& kv : map_) n += std::string_view(kv.first.bytes).substr(0, prefix.size()) == prefix ? 1 : 0;
  return n;
}

}  // namespace ddp::rendezvous
