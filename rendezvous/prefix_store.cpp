// Prefixing decorator; see prefix_store.hpp.
#include "ddplaunch/rendezvous/prefix_store.hpp"

#include "ddplaunch/rendezvous/error.hpp"

namespace ddp::rendezvous {

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> store)
    : prefix_(std::move(prefix)), store_(std::move(store)) {
  DDP_ASSERT(store_ != nullptr, "PrefixStore '" + prefix_ + "' needs a store");
}

std::vector<std::string> PrefixStore::join(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(join(k));
  return out;
}

void PrefixStore::set(const std::string& key, const std::string& value) {
  store_->set(join(key), value);
}

std::string PrefixStore::get(const std::string& key, Duration timeout) {
  return store_->get(join(key), timeout);
}

std::int64_t PrefixStore::add(const std::string& key, std::int64_t delta) {
  return store_->add(join(key), delta);
}

std::string PrefixStore::compare_set(const std::string& key, const std::string& expected, const std::string& desired) {
  return store_->compare_set(join(key), expected, desired);
}

bool PrefixStore::check(const std::vector<std::string>& keys) {
  return store_->check(join(keys));
}

void PrefixStore::wait(const std::vector<std::string>& keys, Duration timeout) {
  store_->wait(join(keys), timeout);
}

bool PrefixStore::delete_key(const std::string& key) {
  return store_->delete_key(join(key));
}

std::int64_t PrefixStore::num_keys() {
  return store_->num_keys();
}

}  // namespace ddp::rendezvous
