// The NCCL unique id's way from rank 0 to the others, through the store, with a generation: the
// n-th communicator a rank creates under a prefix uses "<prefix>/nccl_id/<n>", n counted per rank
// in the store ("<prefix>/generation/<rank>"). So `destroy(); init()` in one round (or any second
// communicator under the same prefix) never reads the id of an earlier one: every rank creates
// its communicators in the same order, so the n-th of each meet at the same key. Apart from
// nccl_communicator.cpp (no NCCL types here), so that it is built and tested without CUDA.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "ddplaunch/rendezvous/store.hpp"

namespace ddp::runtime {

struct NcclIdExchange {
  std::string prefix;  // the communicator's key prefix
  int rank = 0;
  std::chrono::milliseconds timeout{0};  // rank > 0: how long to wait for rank 0's id
  std::size_t id_size = 128;             // sizeof(ncclUniqueId::internal)
};

// Rank 0 stores make_id() (id_size bytes) under this rank's next generation and returns it; the
// others wait for rank 0's id of their own next generation and return it. Blocks (ranks > 0) up to
// the timeout. Throws rendezvous::TimeoutError naming the key, the generation and what to check;
// CommunicatorError when the value there is not an id (another job's); what the store throws.
// Thread-safe as the store is.
// `generation`, when given, receives n (keys of this communicator's own can carry it).
std::string exchange_nccl_id(ddp::rendezvous::Store& store, const NcclIdExchange& x,
                             const std::function<std::string()>& make_id, long long* generation = nullptr);

}  // namespace ddp::runtime
