// The store's one memory budget: what the server holds for its clients, counted together, so
// that no mix of clients (many silent readers, many half-sent requests, a growing value) can make
// the process that hosts the store (node 0's launcher) grow without bound.
//
// Three kinds of bytes are counted:
//   - Stored:   keys and values of the key-value map and the queues (StoreState::stored_bytes);
//   - Buffered: the partial requests the connections' parsers hold (RequestParser::buffered_bytes);
//   - Unsent:   replies written to a connection that the kernel has not taken yet.
// Each count is approximate in the safe direction: string capacities plus a fixed bookkeeping
// cost per entry, not just the bytes on the wire.
//
// The rule (fits): bytes of one kind are admitted while the total stays within the limit AND
// that kind's share stays within 3/4 of it, Buffered and Unsent sharing one "transient" share.
// So writers that fill the store cannot lock readers out (a quarter is left for replies), and
// readers that never read or senders of half requests cannot lock writers out (a quarter is left
// for stored data, which in a real job is small). The caller refuses whatever does not fit by
// closing the connection that asked for it.
//
// Strangers (fits_stranger): in a job with a secret, a connection that has not proven it and does
// not come from a host of the job's last round (TcpStoreServer::trust_round) may add stored data
// only while all stored data stays within 1/16 of the limit. So whatever strangers store, before
// the first round or at any time, the job's own workers keep at least 3/4 - 1/16 of the limit,
// and once the job's own data passes 1/16 strangers store nothing more.
//
// Not thread-safe: the server's event loop owns it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>

namespace ddp::rendezvous {

class MemoryBudget {
 public:
  enum class Kind { Stored, Buffered, Unsent };

  // `limit` in bytes. Throws Error when it is below kMinLimit.
  explicit MemoryBudget(std::size_t limit);
  static constexpr std::size_t kMinLimit = std::size_t{1} << 20;

  std::size_t limit() const { return limit_; }
  std::size_t used() const { return stored_ + buffered_ + unsent_; }
  std::size_t used(Kind kind) const {
    return kind == Kind::Stored ? stored_ : kind == Kind::Buffered ? buffered_ : unsent_;
  }

  // Whether `bytes` more of `kind` may be charged (see the rule above). Pure. Inline, as are
  // admits() and used(): they run for every request.
  bool fits(Kind kind, std::size_t bytes) const {
    const std::size_t share_limit = limit_ / 4 * 3;
    const std::size_t share = kind == Kind::Stored ? stored_ : buffered_ + unsent_;
    // Written as subtractions: `bytes` comes from a request and may be huge.
    return bytes <= limit_ - std::min(limit_, used()) && bytes <= share_limit - std::min(share_limit, share);
  }
  // Whether a stranger (above) may add `bytes` of stored data: the stranger's share and fits().
  bool fits_stranger(std::size_t bytes) const {
    const std::size_t share_limit = limit_ / 16;
    return fits(Kind::Stored, bytes) && bytes <= share_limit - std::min(share_limit, stored_);
  }
  // Charging never refuses (ask fits first); releasing more than was charged is a bug
  // (DDP_ASSERT), so the counts can never go negative.
  void charge(Kind kind, std::size_t bytes);
  void release(Kind kind, std::size_t bytes);
  // Moves the count of `kind` from `from` to `to` (charge or release of the difference).
  void adjust(Kind kind, std::size_t from, std::size_t to) {
    if (to != from) change(kind, from, to);  // inline: most requests store nothing
  }

  // Why a request whose application grows the stored bytes by `stored` and whose reply has
  // `reply` bytes may not be applied now: "" when both fit, else a sentence with the numbers
  // (for the log line of the closed connection). `stranger`: asked by a stranger (above). Pure.
  std::string refusal(std::size_t stored, std::size_t reply, bool stranger = false) const;
  // Whether refusal() would be empty, without building a string (asked for every request).
  bool admits(std::size_t stored, std::size_t reply, bool stranger = false) const {
    return (stranger ? fits_stranger(stored) : fits(Kind::Stored, stored)) && fits(Kind::Unsent, reply) &&
           reply <= limit_ - std::min(limit_, used() + stored);
  }

  // "stored 1.0 MiB, requests 0 B, replies 12.0 MiB of 16.0 MiB", for log lines.
  std::string describe() const;

 private:
  std::size_t& count(Kind kind);
  void change(Kind kind, std::size_t from, std::size_t to);
  std::size_t limit_;
  std::size_t stored_ = 0;
  std::size_t buffered_ = 0;
  std::size_t unsent_ = 0;
};

// "12.0 MiB", "512 B": a byte count for messages.
std::string format_bytes(std::size_t bytes);

// One connection's part of the budget: its partial request and its unsent replies, released
// together when the connection closes (release_all, or the destructor as a safety net; the
// budget must outlive it). Not thread-safe.
class ConnectionCharge {
 public:
  explicit ConnectionCharge(MemoryBudget& budget) : budget_(budget) {}
  ~ConnectionCharge() { release_all(); }
  ConnectionCharge(const ConnectionCharge&) = delete;
  ConnectionCharge& operator=(const ConnectionCharge&) = delete;

  // Sets the partial request's count to `bytes`. Returns false, charging nothing new, when
  // growing to `bytes` does not fit the budget (a shrink always succeeds), unless `exempt` (a
  // proven launcher's connection, see TcpStoreServer::exempt).
  bool buffer(std::size_t bytes, bool exempt = false);
  // Replies appended to / taken by the kernel from this connection's queue.
  void queued(std::size_t bytes);
  void sent(std::size_t bytes);
  std::size_t buffered() const { return buffered_; }
  std::size_t unsent() const { return unsent_; }
  void release_all();

 private:
  MemoryBudget& budget_;
  std::size_t buffered_ = 0;
  std::size_t unsent_ = 0;
};

}  // namespace ddp::rendezvous
