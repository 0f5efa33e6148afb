// The key-value semantics shared by the TCP server's state and the in-memory store: counters as
// decimal text, COMPARE_SET's four cases, append. No waiting, no locking: callers add those.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace ddp::rendezvous {

class KeyValueMap {
 public:
  // nullptr when the key is missing. The pointer is valid until the next mutation.
  const std::string* find(const std::string& key) const;
  bool contains(const std::string& key) const { return map_.count(key) != 0; }

  void set(const std::string& key, std::string value);
  void append(const std::string& key, std::string_view bytes);

  // Adds `delta` to the counter under `key` (0 when missing), stores the result as decimal text
  // and returns it. Throws ProtocolError when the stored value is not a decimal int64.
  std::int64_t add(const std::string& key, std::int64_t delta);

  // COMPARE_SET as PyTorch's servers do it:
  //   missing,  expected == ""  → store desired, return desired
  //   missing,  expected != ""  → no change, return expected (sic; callers cannot tell)
  //   present,  value == expected → store desired, return desired
  //   present,  value != expected → no change, return the current value
  // `changed` tells whether the map was written.
  std::string compare_set(const std::string& key, const std::string& expected, std::string desired, bool& changed);

  bool erase(const std::string& key);
  std::size_t size() const { return map_.size(); }
  std::vector<std::string> keys() const;

 private:
  std::unordered_map<std::string, std::string> map_;
};

}  // namespace ddp::rendezvous
