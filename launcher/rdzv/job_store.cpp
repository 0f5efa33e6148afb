// See job_store.hpp.
#include "launcher/rdzv/job_store.hpp"

#include "ddplaunch/rendezvous/prefix_store.hpp"
#include "launcher/rdzv/job_secret.hpp"
#include "launcher/rdzv/signed_store.hpp"

namespace ddp::launcher {

std::string job_key_prefix(const std::string& run_id, const std::string& secret) {
  return store_namespace(secret) + "/" + run_id;
}

JobStores job_stores(std::shared_ptr<rendezvous::Store> connection, const std::string& run_id,
                     const std::string& secret) {
  const std::string space = store_namespace(secret);
  const std::string job_prefix = job_key_prefix(run_id, secret);
  auto root = std::make_shared<rendezvous::PrefixStore>(space, connection);
  auto job = std::make_shared<rendezvous::PrefixStore>(job_prefix, connection);
  if (secret.empty()) return JobStores{root, job};
  return JobStores{std::make_shared<SignedStore>(root, secret, space),
                   std::make_shared<SignedStore>(job, secret, job_prefix)};
}

}  // namespace ddp::launcher
