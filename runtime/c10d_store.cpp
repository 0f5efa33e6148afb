// See c10d_store.hpp.
#include "runtime/c10d_store.hpp"

#include <c10/util/Exception.h>

#include "ddplaunch/rendezvous/error.hpp"

namespace ddp::runtime {
namespace {

std::string text(const std::vector<uint8_t>& bytes) {
  return {bytes.begin(), bytes.end()};
}

std::vector<uint8_t> bytes(const std::string& text) {
  return {text.begin(), text.end()};
}

// c10d's "no timeout" (zero) is a wait for ever; a year stands for it.
std::chrono::milliseconds effective(std::chrono::milliseconds timeout) {
  return timeout == c10d::Store::kNoTimeout ? std::chrono::hours(24 * 365) : timeout;
}

// Runs a store call, turning the project's errors into the ones c10d's callers catch.
template <class F>
auto translated(F&& f) {
  try {
    return f();
  } catch (const rendezvous::ConnectionError& e) {
    C10_THROW_ERROR(DistNetworkError, e.what());
  } catch (const ddp::Error& e) {
    C10_THROW_ERROR(DistStoreError, e.what());
  }
}

}  // namespace

C10dStore::C10dStore(std::shared_ptr<rendezvous::Store> store, Connect connect, std::chrono::milliseconds timeout)
    : c10d::Store(timeout), store_(std::move(store)), connect_(std::move(connect)) {}

c10::intrusive_ptr<c10d::Store> C10dStore::clone() {
  return c10::make_intrusive<C10dStore>(connect_ ? translated(connect_) : store_, connect_, timeout_);
}

void C10dStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  translated([&] { store_->set(key, text(value)); });
}

std::vector<uint8_t> C10dStore::compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                           const std::vector<uint8_t>& desired) {
  return translated([&] { return bytes(store_->compare_set(key, text(expected), text(desired))); });
}

std::vector<uint8_t> C10dStore::get(const std::string& key) {
  return translated([&] { return bytes(store_->get(key, effective(timeout_))); });
}

int64_t C10dStore::add(const std::string& key, int64_t value) {
  return translated([&] { return store_->add(key, value); });
}

bool C10dStore::deleteKey(const std::string& key) {
  return translated([&] { return store_->delete_key(key); });
}

bool C10dStore::check(const std::vector<std::string>& keys) {
  return translated([&] { return store_->check(keys); });
}

int64_t C10dStore::getNumKeys() {
  return translated([&] { return store_->num_keys(); });
}

void C10dStore::wait(const std::vector<std::string>& keys) {
  wait(keys, timeout_);
}

void C10dStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  translated([&] { store_->wait(keys, effective(timeout)); });
}

}  // namespace ddp::runtime
