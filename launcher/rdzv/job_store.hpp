// The launcher's two views of the store, built in one place: the namespace view (the root of
// every job's keys, where the run-id check lives) and the job's view under it.
//   without a secret: "ddplaunch/" and "ddplaunch/<run_id>/", plain PrefixStores;
//   with a job secret (job_secret.hpp): "ddplaunch/<tag>/" and "ddplaunch/<tag>/<run_id>/",
//   where the tag derives from the secret (so a stranger cannot name the keys), both signed
//   (signed_store.hpp; the MAC covers the full key, so the two views agree on every record).
// Workers' keys (PyTorch's) are elsewhere in the store and never touched.
#pragma once

#include <memory>
#include <string>

#include "ddplaunch/rendezvous/store.hpp"

namespace ddp::launcher {

struct JobStores {
  std::shared_ptr<rendezvous::Store> root;  // the namespace view
  std::shared_ptr<rendezvous::Store> job;   // the job's view
};

// The job's view's prefix, "ddplaunch/<run_id>" or "ddplaunch/<tag>/<run_id>" (without the
// TCPStore client's "/" in front). Pure.
std::string job_key_prefix(const std::string& run_id, const std::string& secret);

// Wraps `connection` (un-prefixed). Does not block, never throws.
JobStores job_stores(std::shared_ptr<rendezvous::Store> connection, const std::string& run_id,
                     const std::string& secret);

}  // namespace ddp::launcher
