// See nccl_id.hpp.
#include "runtime/nccl_id.hpp"

#include <fmt/format.h>

#include "ddplaunch/communicator.hpp"
#include "ddplaunch/rendezvous/error.hpp"

namespace ddp::runtime {

std::string exchange_nccl_id(rendezvous::Store& store, const NcclIdExchange& x,
                             const std::function<std::string()>& make_id, long long* generation_out) {
  const long long generation = store.add(fmt::format("{}/generation/{}", x.prefix, x.rank), 1);
  if (generation_out != nullptr) *generation_out = generation;
  const std::string key = fmt::format("{}/nccl_id/{}", x.prefix, generation);
  if (x.rank == 0) {
    std::string id = make_id();
    store.set(key, id);
    return id;
  }
  std::string bytes;
  try {
    bytes = store.get(key, x.timeout);
  } catch (const rendezvous::TimeoutError&) {
    throw rendezvous::TimeoutError(fmt::format(
        "rank {} timed out after {} ms waiting for rank 0 to publish the NCCL id of communicator #{} at '{}'; "
        "check that rank 0 started, that every rank uses prefix '{}', and that every rank creates the same "
        "communicators in the same order (init() as often on each)",
        x.rank, x.timeout.count(), generation, key, x.prefix));
  }
  if (bytes.size() != x.id_size)
    throw CommunicatorError(fmt::format("rank {}: '{}' holds {} bytes, expected an NCCL id of {}; is another job "
                                        "using prefix '{}'?",
                                        x.rank, key, bytes.size(), x.id_size, x.prefix));
  return bytes;
}

}  // namespace ddp::runtime
