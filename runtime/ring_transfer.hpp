// The data mover under every ring collective: streams byte ranges of one buffer to the next rank
// while receiving byte ranges from the previous rank, on two non-blocking sockets driven by one
// poll() loop, so sending and receiving overlap and a reduction of one chunk overlaps the kernel
// moving the next. Torch-free: reductions come in as a callback.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/socket_fd.hpp"

namespace ddp::runtime {

struct ByteRange {
  std::size_t offset = 0;  // from TransferPlan::base
  std::size_t length = 0;
  bool reduce = false;  // receive ranges only: reduce into place instead of copying
};

// What one ring pass moves.
//  - The send stream is the concatenation of `sends`, the receive stream that of `recvs`.
//  - Send byte k may leave only when k < send_allowance + (receive bytes completed), where a
//    receive byte is completed once copied into place or reduced. Ring algorithms are written so
//    that send range i+1 is receive range i (what arrived is forwarded), which this rule makes
//    safe at chunk granularity: that is the pipeline.
//  - Reduced ranges arrive in chunks of at most kChunkBytes (a multiple of `element_size`);
//    `reduce(offset, length, src)` folds each whole chunk into base+offset.
struct TransferPlan {
  char* base = nullptr;
  std::vector<ByteRange> sends;
  std::vector<ByteRange> recvs;
  std::size_t send_allowance = 0;
  std::size_t element_size = 1;
  std::function<void(std::size_t offset, std::size_t length, const char* src)> reduce;
};

// The two ring connections of this rank.
struct RingLinks {
  int to_next = -1;
  int from_prev = -1;
  int next_rank = -1;
  int prev_rank = -1;
};

inline constexpr std::size_t kChunkBytes = 1024 * 1024;

// Element range [begin, end) of part `index` of `n` elements split into `parts` near-equal parts
// (the first n % parts one longer): how ring collectives divide a tensor among ranks.
inline std::pair<std::int64_t, std::int64_t> ring_segment(std::int64_t n, int parts, int index) {
  const std::int64_t base = n / parts, extra = n % parts;
  const std::int64_t begin = index * base + std::min<std::int64_t>(index, extra);
  return {begin, begin + base + (index < extra ? 1 : 0)};
}

// Runs the plan to completion. Blocks until done or `deadline`. Not thread-safe (one transfer
// per RingLinks at a time). Throws PeerError (naming the peer's rank) when a peer closed or reset
// its connection, rendezvous::TimeoutError (naming the rank waited for and the progress) at the
// deadline. After a throw the links hold an unknown amount of unread data: the caller must treat
// them as broken.
void ring_transfer(const TransferPlan& plan, const RingLinks& links, Clock::time_point deadline,
                   const std::string& what);

// One step of a ring exchange of a few bytes (a token, a vote): sends `size` bytes of `mine` to
// rank+1, then receives `size` bytes from rank-1 into `theirs`. The socket buffers hold such small
// messages, so every rank may send first. N-1 steps in which each rank forwards what it received
// make a barrier (rank r then knows ranks r-1 .. r-N+1 have arrived) or a small allreduce.
// Blocks until done or `deadline`. Not thread-safe (as ring_transfer). Throws PeerError naming
// the rank whose connection failed, rendezvous::TimeoutError naming the rank waited for and
// `what`; afterwards the links must be treated as broken.
void ring_step(const RingLinks& links, const void* mine, void* theirs, std::size_t size, Clock::time_point deadline,
               const std::string& what);

}  // namespace ddp::runtime
