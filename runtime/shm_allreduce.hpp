// Allreduce through shared memory for CPU communicator ranks that share a host. A TCP ring
// allreduce pushes 2(N-1) times the tensor through loopback TCP (two kernel copies per byte per
// hop); here every rank copies its tensor into shared memory once, reduces 1/N of it and copies
// the result back, memory bandwidth instead of the TCP stack. The ring's TCP links still carry
// the synchronisation (a few bytes per step), so a dead peer surfaces as a closed connection
// (PeerError naming it) and the collective's deadline bounds every wait, as on the TCP path.
//
// The segment holds a header (the creator's nonce) and three buffers of N slots of `slot_bytes`.
// A tensor goes through in chunks of slot_bytes; each chunk is split into N element ranges
// ("parts"). Chunk k uses buffer k mod 3 (counting the chunks of earlier allreduces too), and
// rank r's slot in it receives rank r's chunk except part r. Phase p of the loop, with one ring
// barrier after it, does on every rank r:
//   1. copy out chunk p-2: part j (j != r) from slot j, where rank j left the reduced part j;
//   2. reduce part r of chunk p-1: rank r's own tensor and part r of the other slots, in rank
//      order, into part r of slot r (for the others), then into rank r's tensor;
//   3. copy in chunk p: the tensor's chunk, except part r, into slot r.
// Within one phase the three steps touch three different buffers, and each buffer is written in
// one phase and read only after the next barrier, so one barrier per chunk suffices (two buffers
// would need two). The rotation continues across allreduces (no barrier at the end of one). One
// rank computes each part, so every rank ends with the very same bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <torch/types.h>

#include "ddplaunch/communicator.hpp"
#include "ddplaunch/rendezvous/store.hpp"
#include "runtime/ring_transfer.hpp"
#include "runtime/shm_segment.hpp"

namespace ddp::runtime {

// out = a (op) b elementwise with torch's kernels (Sum and Average add), the reduction of both
// allreduce paths; `out` (a handle: its data is written) may be `a`. Thread-safe.
void reduce_elementwise(torch::Tensor out, const torch::Tensor& a, const torch::Tensor& b, ReduceOp op);

class ShmAllreduce {
 public:
  // Sets up the shared path; a collective over the ring that every rank calls right after the
  // ring is connected, with its own `enabled` and `min_bytes`. Steps:
  //   1. a ring vote: every rank enabled, every rank on the same host (boot id and host name);
  //      the largest min_bytes wins, so all ranks pick the same path for a size;
  //   2. rank 0 creates the segment and sets `key` to "<name> <slot_bytes>" ("" if it could
  //      not), the others read `key` and map the segment;
  //   3. a second vote: every rank mapped the segment carrying rank 0's nonce; then rank 0
  //      unlinks the name (every rank has tried to open it by then).
  // Returns the same on every rank: nullptr (use TCP) unless every step succeeded everywhere. A
  // rank that fails to create or map only votes no. Blocks until done or `deadline`; throws
  // PeerError / rendezvous::TimeoutError like a collective, store errors from get/set. Not
  // thread-safe (it uses the ring links).
  static std::unique_ptr<ShmAllreduce> connect(rendezvous::Store& store, const std::string& key, const RingLinks& ring,
                                               int rank, int world_size, bool enabled, std::size_t min_bytes,
                                               Clock::time_point deadline);

  // Whether an allreduce of `bytes` takes the shared path (the same answer on every rank).
  bool handles(std::size_t bytes) const { return bytes >= min_bytes_; }

  // Reduces the contiguous CPU tensor `flat` in place (Sum and Average add: the caller divides
  // for Average). Blocks until done or `deadline`; throws PeerError naming the rank whose
  // connection failed, rendezvous::TimeoutError naming the rank waited for; after a throw the
  // ring links are broken. Not thread-safe (one collective at a time, as the communicator).
  void allreduce(const torch::Tensor& flat, ReduceOp op, Clock::time_point deadline, const std::string& what);

 private:
  ShmAllreduce(ShmSegment segment, const RingLinks& ring, int rank, int world_size, std::size_t slot_bytes,
               std::size_t min_bytes)
      : segment_(std::move(segment)),
        ring_(ring),
        rank_(rank),
        world_size_(world_size),
        slot_bytes_(slot_bytes),
        min_bytes_(min_bytes) {}

  struct Chunk;
  Chunk chunk(const torch::Tensor& flat, std::int64_t index) const;
  char* slot(std::int64_t chunk_index, int rank) const;
  void copy_in(const Chunk& c) const;
  void reduce(const Chunk& c, ReduceOp op) const;
  void copy_out(const Chunk& c) const;
  // N-1 ring steps forwarding a counter: returns once every rank has called it as often.
  void barrier(Clock::time_point deadline, const std::string& what);

  ShmSegment segment_;
  RingLinks ring_;  // descriptors owned by the communicator, which owns this object
  int rank_;
  int world_size_;
  std::size_t slot_bytes_;
  std::size_t min_bytes_;
  std::uint64_t barriers_ = 0;
  // Chunks of earlier allreduces: chunk k of this one uses buffer (chunks_before_ + k) mod 3.
  // No barrier ends an allreduce, so a rank may copy the next tensor in while a slower one still
  // copies the last result out; a tensor of another size puts its parts elsewhere, and only
  // continuing the rotation keeps the two apart.
  std::uint64_t chunks_before_ = 0;
};

}  // namespace ddp::runtime
