// The shared-memory allreduce (see shm_allreduce.hpp): set-up votes over the ring, the chunk
// loop, and the reductions with torch's own kernels on views of the tensor and the slots.
#include "runtime/shm_allreduce.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <fstream>
#include <random>

#include <ATen/ATen.h>

#include "common/host_name.hpp"
#include "ddplaunch/rendezvous/error.hpp"

namespace ddp::runtime {
namespace {

constexpr std::uint32_t kVoteMagic = 0x44445348;  // "DDSH"
// The header in front of the slots: the nonce, padded to a page so the slots are page-aligned.
constexpr std::size_t kHeaderBytes = 4096;
constexpr int kBuffers = 3;
// Chunk size. A chunk costs one ring barrier (N-1 hops of a few tens of µs), so smaller chunks
// pay more barriers, while bigger ones fall out of the caches between copy-in, reduction and
// copy-out. Measured with bench/allreduce_bench, 64 MiB float32 on 2 cores shared with other
// jobs, ms per allreduce for 512 KiB / 1 MiB / 2 MiB / 4 MiB slots: 2 ranks 11-12 / 7-11 /
// 12-24 / 15-28, 4 ranks 35-38 / 20-36 / 24-45 / 25-43 under heavy load and - / 19-22 / 21-24 /
// 27-29 under light load (4 MiB slots for 4 ranks outgrow the 32 MiB L3: 50% more CPU).
constexpr std::size_t kSlotBytes = 1 << 20;
// Bound on the whole segment, for many ranks on one host: slots shrink to fit it (not below
// kMinSlotBytes).
constexpr std::size_t kSegmentBudget = 48 << 20;
constexpr std::size_t kMinSlotBytes = 64 << 10;

// What ranks vote on: lo/hi are the min/max of a value all ranks must share, `bytes` the max of
// min_bytes, `ok` the AND of every rank's yes.
struct Vote {
  std::uint32_t magic;
  std::uint32_t ok;
  std::uint64_t lo;
  std::uint64_t hi;
  std::uint64_t bytes;
};

// N-1 ring steps folding each received vote into ours; min/max/AND are idempotent, so folding
// the whole accumulated vote each step is exact: after step s a rank holds ranks r..r-s-1.
Vote ring_vote(const RingLinks& ring, int world_size, Vote mine, Clock::time_point deadline) {
  for (int s = 0; s < world_size - 1; ++s) {
    Vote theirs{};
    ring_step(ring, &mine, &theirs, sizeof mine, deadline, "the shared-memory set-up");
    if (theirs.magic != kVoteMagic)
      throw CommunicatorError("rank " + std::to_string(ring.prev_rank) +
                              " sent garbage during the shared-memory set-up; is another job using the same "
                              "store prefix?");
    mine.ok &= theirs.ok;
    mine.lo = std::min(mine.lo, theirs.lo);
    mine.hi = std::max(mine.hi, theirs.hi);
    mine.bytes = std::max(mine.bytes, theirs.bytes);
  }
  return mine;
}

// Hash of the kernel's boot id and the host name: equal on ranks of one machine (one boot id)
// and one container/UTS namespace (one host name); ranks in different containers on a host may
// not share /dev/shm, and those then take the TCP path. Step 3 of connect() still catches a
// /dev/shm that is not shared.
std::uint64_t host_identity() {
  std::string id;
  std::getline(std::ifstream("/proc/sys/kernel/random/boot_id"), id);
  id += '\n';
  id += host_name();
  std::uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (const unsigned char c : id) h = (h ^ c) * 1099511628211ULL;
  return h;
}

std::size_t segment_bytes(std::size_t slot_bytes, int world_size) {
  return kHeaderBytes + kBuffers * static_cast<std::size_t>(world_size) * slot_bytes;
}

// Rank 0's half of step 2: returns the segment (invalid if creation failed) and sets `key`.
ShmSegment create_segment(rendezvous::Store& store, const std::string& key, int world_size, std::uint64_t& nonce) {
  const std::size_t fit = kSegmentBudget / (kBuffers * static_cast<std::size_t>(world_size));
  const std::size_t slot_bytes = std::max(kMinSlotBytes, std::min(kSlotBytes, fit) / 4096 * 4096);
  ShmSegment segment;
  try {
    segment = ShmSegment::create(segment_bytes(slot_bytes, world_size));
    std::random_device rd;
    nonce = ((std::uint64_t{rd()} << 32) ^ rd()) | 1;  // never 0, which means "no segment"
    std::memcpy(segment.data(), &nonce, sizeof nonce);
  } catch (const CommunicatorError&) {
    // /dev/shm full or missing: everyone votes for TCP in step 3, which is all this can mean.
  }
  store.set(key, segment.valid() ? segment.name() + " " + std::to_string(slot_bytes) : "");
  return segment;
}

// The other ranks' half of step 2: maps the segment `key` names; invalid if it cannot.
ShmSegment open_segment(rendezvous::Store& store, const std::string& key, int world_size, Clock::time_point deadline,
                        std::size_t& slot_bytes, std::uint64_t& nonce) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  const std::string value = store.get(key, std::max(left, std::chrono::milliseconds(0)));
  const std::size_t space = value.find(' ');
  if (space == std::string::npos) return {};  // rank 0 could not create one
  const char* end = value.data() + value.size();
  if (std::from_chars(value.data() + space + 1, end, slot_bytes).ptr != end || slot_bytes == 0) return {};
  try {
    ShmSegment segment = ShmSegment::open(value.substr(0, space), segment_bytes(slot_bytes, world_size));
    std::memcpy(&nonce, segment.data(), sizeof nonce);
    return segment;
  } catch (const CommunicatorError&) {
    // Another host or /dev/shm after all, or the segment is gone: vote for TCP.
    return {};
  }
}

}  // namespace

void reduce_elementwise(torch::Tensor out, const torch::Tensor& a, const torch::Tensor& b, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Average:
      at::add_out(out, a, b);
      break;
    case ReduceOp::Min:
      at::minimum_out(out, a, b);
      break;
    case ReduceOp::Max:
      at::maximum_out(out, a, b);
      break;
  }
}

std::unique_ptr<ShmAllreduce> ShmAllreduce::connect(rendezvous::Store& store, const std::string& key,
                                                    const RingLinks& ring, int rank, int world_size, bool enabled,
                                                    std::size_t min_bytes, Clock::time_point deadline) {
  const std::uint64_t host = host_identity();
  const Vote first = ring_vote(ring, world_size, {kVoteMagic, enabled ? 1u : 0u, host, host, min_bytes}, deadline);
  if (!first.ok || first.lo != first.hi) return nullptr;

  std::uint64_t nonce = 0;
  std::size_t slot_bytes = 0;
  ShmSegment segment = rank == 0 ? create_segment(store, key, world_size, nonce)
                                 : open_segment(store, key, world_size, deadline, slot_bytes, nonce);
  if (rank == 0 && segment.valid()) slot_bytes = (segment.size() - kHeaderBytes) / (kBuffers * world_size);
  const Vote second = ring_vote(ring, world_size, {kVoteMagic, segment.valid() ? 1u : 0u, nonce, nonce, 0}, deadline);
  // Every rank has mapped the segment or given up on it: the name is no longer needed.
  segment.unlink();
  if (!second.ok || second.lo != second.hi) return nullptr;
  return std::unique_ptr<ShmAllreduce>(
      new ShmAllreduce(std::move(segment), ring, rank, world_size, slot_bytes, first.bytes));
}

// Chunk `index` of the tensor: `count` elements from `data`.
struct ShmAllreduce::Chunk {
  std::int64_t index;
  char* data;
  std::int64_t count;
  std::size_t element_size;
  torch::ScalarType dtype;

  // Part `rank` of the chunk: element range [first, second).
  std::pair<std::int64_t, std::int64_t> part(int rank, int world_size) const {
    return ring_segment(count, world_size, rank);
  }
  std::size_t bytes(std::int64_t elements) const { return static_cast<std::size_t>(elements) * element_size; }
};

ShmAllreduce::Chunk ShmAllreduce::chunk(const torch::Tensor& flat, std::int64_t index) const {
  const std::size_t es = flat.element_size();
  const auto per_chunk = static_cast<std::int64_t>(slot_bytes_ / es);
  const std::int64_t first = index * per_chunk;
  return {index, static_cast<char*>(flat.data_ptr()) + first * es, std::min(per_chunk, flat.numel() - first), es,
          flat.scalar_type()};
}

char* ShmAllreduce::slot(std::int64_t chunk_index, int rank) const {
  const auto buffer = static_cast<std::size_t>((chunks_before_ + static_cast<std::uint64_t>(chunk_index)) % kBuffers);
  return segment_.data() + kHeaderBytes + (buffer * world_size_ + rank) * slot_bytes_;
}

void ShmAllreduce::copy_in(const Chunk& c) const {
  // Part r stays in the tensor: only this rank reduces it, straight from there.
  const auto [b, e] = c.part(rank_, world_size_);
  char* mine = slot(c.index, rank_);
  std::memcpy(mine, c.data, c.bytes(b));
  std::memcpy(mine + c.bytes(e), c.data + c.bytes(e), c.bytes(c.count - e));
}

void ShmAllreduce::reduce(const Chunk& c, ReduceOp op) const {
  const auto [b, e] = c.part(rank_, world_size_);
  if (e == b) return;
  const auto options = torch::TensorOptions().dtype(c.dtype);
  const auto view = [&](char* base) { return torch::from_blob(base + c.bytes(b), {e - b}, options); };
  const auto input = [&](int j) { return view(j == rank_ ? c.data : slot(c.index, j)); };
  // The output is our slot's part r, which copy_in left free and no input aliases; the others
  // copy the result from there. Folding in rank order keeps the arithmetic of every part the same
  // whichever rank computes it.
  torch::Tensor out = view(slot(c.index, rank_));
  reduce_elementwise(out, input(0), input(1), op);
  for (int j = 2; j < world_size_; ++j) reduce_elementwise(out, out, input(j), op);
  std::memcpy(c.data + c.bytes(b), out.data_ptr(), c.bytes(e - b));
}

void ShmAllreduce::copy_out(const Chunk& c) const {
  for (int j = 0; j < world_size_; ++j) {
    if (j == rank_) continue;
    const auto [b, e] = c.part(j, world_size_);
    std::memcpy(c.data + c.bytes(b), slot(c.index, j) + c.bytes(b), c.bytes(e - b));
  }
}

void ShmAllreduce::barrier(Clock::time_point deadline, const std::string& what) {
  const std::uint64_t token = ++barriers_;
  for (int s = 0; s < world_size_ - 1; ++s) {
    std::uint64_t theirs = 0;
    ring_step(ring_, &token, &theirs, sizeof token, deadline, what);
    DDP_ASSERT(theirs == token, "shared-memory barrier " + std::to_string(token) + " on rank " + std::to_string(rank_) +
                                    " got token " + std::to_string(theirs));
  }
}

void ShmAllreduce::allreduce(const torch::Tensor& flat, ReduceOp op, Clock::time_point deadline,
                             const std::string& what) {
  const auto per_chunk = static_cast<std::int64_t>(slot_bytes_ / flat.element_size());
  const std::int64_t chunks = (flat.numel() + per_chunk - 1) / per_chunk;
  for (std::int64_t p = 0; p <= chunks + 1; ++p) {
    if (p >= 2) copy_out(chunk(flat, p - 2));
    if (p >= 1 && p <= chunks) reduce(chunk(flat, p - 1), op);
    if (p < chunks) copy_in(chunk(flat, p));
    if (p <= chunks) barrier(deadline, what);
  }
  chunks_before_ += static_cast<std::uint64_t>(chunks);
}

}  // namespace ddp::runtime
