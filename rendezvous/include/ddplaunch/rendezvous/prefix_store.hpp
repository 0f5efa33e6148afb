// A namespace over another Store: every key becomes "<prefix>/<key>", as PyTorch's PrefixStore
// does, so ours and PyTorch's prefixed views of one TCP store see the same keys.
#pragma once

#include <memory>

#include "ddplaunch/rendezvous/store.hpp"

namespace ddp::rendezvous {

// Thread-safe as far as the wrapped store is; blocks and throws exactly as the wrapped store.
class PrefixStore final : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> store);

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, Duration timeout) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  std::string compare_set(const std::string& key, const std::string& expected, const std::string& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, Duration timeout) override;
  bool delete_key(const std::string& key) override;
  std::int64_t num_keys() override;
  void interrupt() override { store_->interrupt(); }
  std::string local_address() override { return store_->local_address(); }

  const std::shared_ptr<Store>& underlying() const { return store_; }

 private:
  std::string join(const std::string& key) const { return prefix_ + "/" + key; }
  std::vector<std::string> join(const std::vector<std::string>& keys) const;

  std::string prefix_;
  std::shared_ptr<Store> store_;
};

}  // namespace ddp::rendezvous
