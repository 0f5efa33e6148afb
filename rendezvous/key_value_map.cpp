// Key-value semantics; see key_value_map.hpp.
#include "ddplaunch/rendezvous/key_value_map.hpp"

#include <charconv>

#include "ddplaunch/rendezvous/error.hpp"

namespace ddp::rendezvous {

const std::string* KeyValueMap::find(const std::string& key) const {
  const auto it = map_.find(key);
  return it == map_.end() ? nullptr : &it->second;
}

void KeyValueMap::set(const std::string& key, std::string value) {
  map_[key] = std::move(value);
}

void KeyValueMap::append(const std::string& key, std::string_view bytes) {
  map_[key].append(bytes);
}

std::int64_t KeyValueMap::add(const std::string& key, std::int64_t delta) {
  std::int64_t current = 0;
  auto it = map_.find(key);
  if (it != map_.end()) {
    const std::string& text = it->second;
    const char* first = text.data();
    const char* last = first + text.size();
    if (first != last && *first == '+') ++first;  // stoll, which PyTorch uses, accepts a '+'
    const auto [end, ec] = std::from_chars(first, last, current);
    if (ec != std::errc() || end != last || first == last) {
      throw ProtocolError("ADD on key '" + key + "' whose value is not a decimal integer (" +
                          std::to_string(text.size()) + " bytes)");
    }
  }
  // Wrap like the two's-complement arithmetic of PyTorch's servers instead of overflowing.
  const auto sum = static_cast<std::int64_t>(static_cast<std::uint64_t>(current) + static_cast<std::uint64_t>(delta));
  map_[key] = std::to_string(sum);
  return sum;
}

std::string KeyValueMap::compare_set(const std::string& key, const std::string& expected, std::string desired,
                                     bool& changed) {
  changed = false;
  auto it = map_.find(key);
  if (it == map_.end()) {
    if (!expected.empty()) return expected;
    changed = true;
    map_.emplace(key, desired);
    return desired;
  }
  if (it->second != expected) return it->second;
  changed = true;
  it->second = desired;
  return desired;
}

bool KeyValueMap::erase(const std::string& key) {
  return map_.erase(key) != 0;
}

std::vector<std::string> KeyValueMap::keys() const {
  std::vector<std::string> out;
  out.reserve(map_.size());
  for (const auto& kv : map_) out.push_back(kv.first);
  return out;
}

}  // namespace ddp::rendezvous
