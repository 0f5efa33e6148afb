// LibTorch's c10d::Store over the project's rendezvous::Store, so that c10d's process groups
// (ProcessGroupNCCL for the nccl-c10d backend) meet in a store the caller already has (an
// in-process MemoryStore in tests, a PrefixStore view). Under ddplaunch the runtime gives
// ProcessGroupNCCL a real c10d::TCPStore client instead (process_group.cpp); this adapter is for
// the other stores.
// Semantics as c10d expects them: get() and wait() block up to the store's timeout (c10d's
// kNoTimeout, zero, waits for ever); a timeout throws c10::DistStoreError, a lost connection
// c10::DistNetworkError, any other store error c10::DistStoreError, each with the store's message.
// clone() gives a copy on a new connection when a `connect` function was given (c10d's
// background threads then never queue behind a blocking wait), else one sharing the same store
// (fine for in-process stores, whose waits block nobody else).
// Thread-safety: as the wrapped store.
#pragma once

#include <functional>
#include <memory>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "ddplaunch/rendezvous/store.hpp"

namespace ddp::runtime {

class C10dStore : public c10d::Store {
 public:
  using Connect = std::function<std::shared_ptr<rendezvous::Store>()>;
  explicit C10dStore(std::shared_ptr<rendezvous::Store> store, Connect connect = {},
                     std::chrono::milliseconds timeout = c10d::Store::kDefaultTimeout);

  c10::intrusive_ptr<c10d::Store> clone() override;
  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                  const std::vector<uint8_t>& desired) override;
  std::vector<uint8_t> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t value) override;
  bool deleteKey(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t getNumKeys() override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

 private:
  std::shared_ptr<rendezvous::Store> store_;
  Connect connect_;
};

}  // namespace ddp::runtime
