// A rendezvous::Store over etcd v3 (etcd_client.hpp), so that the launcher's rendezvous rounds,
// outcomes and exit barrier (node_rendezvous.hpp, job_round.hpp, agent.hpp) run on etcd as they
// run on the built-in store:
//   set → put; get and wait → a read, then a watch from the revision of that read, so a key
//   written in between is never missed (an event, not a poll);
//   add and compare_set → a read, then a transaction that writes only if the key's mod_revision
//   is still the one read (compare-and-swap), retried when another node changed it first;
//   delete_key → delete; num_keys → the keys under the prefix.
// Every key lives under `prefix` (one job's namespace in a shared etcd) and is put with `lease`
// (the job's lease, etcd_job_lease.hpp), so a job's keys vanish when no launcher of it is left.
// Errors as EtcdClient's: EtcdError (also add() on a key that holds no decimal number),
// ConnectionError (no member reachable, or interrupted), TimeoutError (a get or wait past its
// timeout; the store stays usable).
// Thread-safe: calls are serialised on one client (a blocked wait holds up the others, as on a
// TCP store connection); interrupt() from any thread ends a blocked wait at once.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include "ddplaunch/rendezvous/store.hpp"
#include "launcher/etcd/etcd_client.hpp"

namespace ddp::launcher {

struct EtcdStoreOptions {
  EtcdClientOptions client;
  std::string prefix;      // e.g. "/ddplaunch/<run_id>/"
  std::int64_t lease = 0;  // attached to every write (0: none)
};

class EtcdStore : public rendezvous::Store {
 public:
  // Does not connect (the first call does). Throws UsageError for malformed endpoints.
  explicit EtcdStore(EtcdStoreOptions options);

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, Duration timeout) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  std::string compare_set(const std::string& key, const std::string& expected, const std::string& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, Duration timeout) override;
  bool delete_key(const std::string& key) override;
  std::int64_t num_keys() override;
  void interrupt() override { client_.interrupt(); }
  // The local IP of the connection to etcd (the first call connects: it may block and throw like
  // the others): the address other nodes that reach the same etcd can reach this one at.
  std::string local_address() override;

 private:
  std::string full(const std::string& key) const { return options_.prefix + key; }
  // get() without the lock.
  std::string get_locked(const std::string& key, rendezvous::Store::Duration timeout);

  EtcdStoreOptions options_;
  std::mutex mutex_;
  EtcdClient client_;
};

}  // namespace ddp::launcher
