// The poll() loop behind the ring collectives (see ring_transfer.hpp). Empty ranges are dropped
// first, so each stream is a list of non-empty ranges walked by a cursor.
#include "runtime/ring_transfer.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "ddplaunch/cpu_communicator.hpp"
#include "ddplaunch/rendezvous/error.hpp"

namespace ddp::runtime {
namespace {

// Reduction chunks: at least this big, and at most kChunkBytes; in between, an eighth of the
// largest reduced range. Bigger chunks mean fewer recv() calls and reductions per byte, smaller
// ones start forwarding reduced data sooner; eight chunks per range keep the pipeline going for
// mid-sized tensors. Measured with bench/allreduce_bench on 2 cores against a fixed 256 KiB:
// 64 MiB on 2 ranks 47-54 -> 43-44 ms, 16 MiB on 4 ranks 24 -> 21 ms, the rest unchanged; a
// fixed 1 MiB made 4 MiB on 4 ranks 13% slower.
constexpr std::size_t kMinChunkBytes = 256 * 1024;
constexpr std::size_t kChunksPerRange = 8;

// Chunks' worth of bytes received per wake-up at most, so a fast sender cannot starve our own
// sending.
constexpr std::size_t kMaxChunksPerWake = 4;

// The chunk size for `plan`, never more than its largest reduced range (the chunk buffer is
// allocated at this size, so a small allreduce does not pay for a big one).
std::size_t chunk_size(const TransferPlan& plan) {
  std::size_t largest = 0;
  for (const ByteRange& r : plan.recvs)
    if (r.reduce) largest = std::max(largest, r.length);
  const std::size_t bytes = std::min(largest, std::clamp(largest / kChunksPerRange, kMinChunkBytes, kChunkBytes));
  return std::max(bytes / plan.element_size, std::size_t{1}) * plan.element_size;
}

std::vector<ByteRange> non_empty(const std::vector<ByteRange>& ranges, std::size_t& total) {
  std::vector<ByteRange> out;
  total = 0;
  for (const ByteRange& r : ranges) {
    if (r.length == 0) continue;
    out.push_back(r);
    total += r.length;
  }
  return out;
}

// Position in a stream of ranges.
struct Cursor {
  const std::vector<ByteRange>* ranges;
  std::size_t index = 0;
  std::size_t offset = 0;  // within ranges[index]

  const ByteRange& range() const { return (*ranges)[index]; }
  std::size_t left_in_range() const { return range().length - offset; }
  void advance(std::size_t n) {
    offset += n;
    if (offset == range().length) {
      ++index;
      offset = 0;
    }
  }
};

bool would_block(int err) {
  return err == EAGAIN || err == EWOULDBLOCK || err == EINTR;
}

// The state of one ring_transfer() call: two stream cursors, the reduction chunk being filled,
// and the byte counters that gate sending.
class Transfer {
 public:
  Transfer(const TransferPlan& plan, const RingLinks& links, const std::string& what)
      : plan_(plan),
        links_(links),
        what_(what),
        sends_(non_empty(plan.sends, total_send_)),
        recvs_(non_empty(plan.recvs, total_recv_)),
        chunk_cap_(chunk_size(plan)),
        // Copies into place (no reduction) take the same budget as full-size chunks.
        max_recv_per_wake_(kMaxChunksPerWake * std::max(chunk_cap_, kMinChunkBytes)) {}

  void run(Clock::time_point deadline) {
    for (;;) {
      // Receive first: what arrives may unlock more sending.
      receive();
      const bool send_blocked = send();
      if (sent_ == total_send_ && done_ == total_recv_) return;
      wait(send_blocked, deadline);
    }
  }

 private:
  // Reads what is available (up to max_recv_per_wake_) into place or into the chunk, reducing
  // each chunk once whole.
  void receive() {
    std::size_t taken = 0;
    while (done_ < total_recv_ && taken < max_recv_per_wake_) {
      const ByteRange& r = recv_cur_.range();
      char* dst;
      std::size_t want;
      if (r.reduce) {
        if (!chunk_) chunk_ = std::make_unique_for_overwrite<char[]>(chunk_cap_);
        if (chunk_len_ == 0) chunk_len_ = std::min(chunk_cap_, recv_cur_.left_in_range());
        dst = chunk_.get() + chunk_fill_;
        want = chunk_len_ - chunk_fill_;
      } else {
        dst = plan_.base + r.offset + recv_cur_.offset;
        want = recv_cur_.left_in_range();
      }
      const ssize_t n = ::recv(links_.from_prev, dst, want, MSG_DONTWAIT);
      if (n == 0) peer_lost(links_.prev_rank, "receiving from it", 0);
      if (n < 0) {
        if (would_block(errno)) return;
        peer_lost(links_.prev_rank, "receiving from it", errno);
      }
      const auto got = static_cast<std::size_t>(n);
      taken += got;
      if (!r.reduce) {
        recv_cur_.advance(got);
        done_ += got;
      } else if ((chunk_fill_ += got) == chunk_len_) {
        plan_.reduce(r.offset + recv_cur_.offset, chunk_len_, chunk_.get());
        recv_cur_.advance(chunk_len_);
        done_ += chunk_len_;
        chunk_len_ = chunk_fill_ = 0;
      }
    }
  }

  // Sends what the gate allows; returns true when the socket buffer filled up first.
  bool send() {
    const std::size_t limit = std::min(total_send_, plan_.send_allowance + done_);
    while (sent_ < limit) {
      const std::size_t n_max = std::min(send_cur_.left_in_range(), limit - sent_);
      const ssize_t n = ::send(links_.to_next, plan_.base + send_cur_.range().offset + send_cur_.offset, n_max,
                               MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n < 0) {
        if (would_block(errno)) return true;
        peer_lost(links_.next_rank, "sending to it", errno);
      }
      send_cur_.advance(static_cast<std::size_t>(n));
      sent_ += static_cast<std::size_t>(n);
    }
    return false;
  }

  // Sleeps in poll() until data arrives or the send buffer drains; throws at the deadline.
  void wait(bool send_blocked, Clock::time_point deadline) {
    pollfd fds[2];
    nfds_t count = 0;
    if (done_ < total_recv_) fds[count++] = {links_.from_prev, POLLIN, 0};
    if (send_blocked) fds[count++] = {links_.to_next, POLLOUT, 0};
    DDP_ASSERT(count > 0, "ring transfer stalled in " + what_ + ": " + progress() + ", allowance " +
                              std::to_string(plan_.send_allowance));
    const int rc = ::poll(fds, count, poll_timeout_ms(deadline));
    if (rc < 0 && errno != EINTR)
      throw rendezvous::ConnectionError(std::string("poll failed: ") + std::strerror(errno));
    if (rc == 0 && Clock::now() >= deadline) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start_).count();
      const bool waiting_recv = done_ < total_recv_;
      const std::string peer = "rank " + std::to_string(waiting_recv ? links_.prev_rank : links_.next_rank);
      throw rendezvous::TimeoutError("timed out after " + std::to_string(ms) + " ms in " + what_ + " waiting for " +
                                     peer + (waiting_recv ? " to send data" : " to accept data") + " (" + progress() +
                                     "); is " + peer + " alive and in the same collective?");
    }
  }

  [[noreturn]] void peer_lost(int rank, const char* verb, int err) const {
    const std::string peer = "rank " + std::to_string(rank);
    const std::string why = err == 0 ? peer + " closed the connection"
                                     : "the connection to " + peer + " failed (" + std::strerror(err) + ")";
    throw PeerError(rank, why + " while " + verb + " (" + progress() + ")");
  }

  std::string progress() const {
    return std::to_string(done_) + " of " + std::to_string(total_recv_) + " bytes received, " + std::to_string(sent_) +
           " of " + std::to_string(total_send_) + " sent";
  }

  const TransferPlan& plan_;
  const RingLinks& links_;
  const std::string& what_;
  std::size_t total_send_ = 0;
  std::size_t total_recv_ = 0;
  const std::vector<ByteRange> sends_;
  const std::vector<ByteRange> recvs_;
  const std::size_t chunk_cap_;
  const std::size_t max_recv_per_wake_;
  std::unique_ptr<char[]> chunk_;
  std::size_t chunk_len_ = 0;   // bytes the chunk being filled will hold; 0 when none
  std::size_t chunk_fill_ = 0;  // bytes of it received so far
  Cursor send_cur_{&sends_};
  Cursor recv_cur_{&recvs_};
  std::size_t sent_ = 0;
  std::size_t done_ = 0;  // receive bytes copied into place or reduced
  const Clock::time_point start_ = Clock::now();
};

}  // namespace

void ring_transfer(const TransferPlan& plan, const RingLinks& links, Clock::time_point deadline,
                   const std::string& what) {
  Transfer(plan, links, what).run(deadline);
}

void ring_step(const RingLinks& links, const void* mine, void* theirs, std::size_t size, Clock::time_point deadline,
               const std::string& what) {
  const auto start = Clock::now();
  const auto exchange = [&](int peer, bool sending) {
    const std::string name = "rank " + std::to_string(peer);
    try {
      if (sending)
        write_exact(links.to_next, mine, size, deadline, name);
      else
        read_exact(links.from_prev, theirs, size, deadline, name);
    } catch (const rendezvous::TimeoutError&) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
      throw rendezvous::TimeoutError("timed out in " + what + " after waiting " + std::to_string(ms) + " ms for " +
                                     name + (sending ? " to accept data" : " to send data") + "; is " + name +
                                     " alive and in the same collective?");
    } catch (const rendezvous::ConnectionError& e) {
      throw PeerError(peer, e.what() + std::string(" (in ") + what + ")");
    }
  };
  exchange(links.next_rank, true);
  exchange(links.prev_rank, false);
}

}  // namespace ddp::runtime
