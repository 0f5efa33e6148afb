// libFuzzer target over the server's connection layer without sockets: several simulated
// connections feed arbitrary byte chunks, read some of their replies or go away, in any order,
// against one StoreState and one MemoryBudget, with the same steps as ServerConnection and
// TcpStoreServer::handle (charge the partial request after each chunk, release it when the
// request completes, ask StoreState::cost and MemoryBudget::refusal before applying, charge
// every reply to its connection, release everything on close).
//
// The input is a script of steps; byte 0 of a step picks the connection (bits 0-2, of 5) and
// the action (bits 3-4), byte 1 is its argument:
//   0: feed the next `arg` bytes of the input as they are;
//   1: the client reads up to arg × 1 KiB of its replies;
//   2: the connection closes and a new one takes its place;
//   3: feed a generated request (VALIDATE first on a fresh connection), so that the budget is
//      reachable from short inputs: arg bits 0-2 pick SET, APPEND, GET, MULTI_GET, QUEUE_PUSH,
//      WAIT, MULTI_SET, or the first half of a SET; bits 3-7 a size of n × 16 KiB; bit 5 of byte 0
//      picks one of two keys.
// Invariants checked after every step: the budget's counts equal the sums over the connections
// and StoreState::stored_bytes(); the total never passes the limit by more than the one-byte
// STOP_WAITING replies delivered unread (admitted without a check, as the server does); a request
// never grows the stored bytes or its reply beyond its cost; a refused or failed request changes
// nothing; parked waiters belong to open connections. Sanitizers and DDP_ASSERT (counts that
// would go negative) catch the rest.
//
// Built as a libFuzzer target with DDP_FUZZ, and always as a replay driver over the seeds in
// connections_corpus/ (replay_main.cpp), which runs in the normal test suite.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ddplaunch/rendezvous/error.hpp"
#include "rendezvous/memory_budget.hpp"
#include "rendezvous/request_parser.hpp"
#include "rendezvous/store_state.hpp"

namespace rdzv = ddp::rendezvous;
using Kind = rdzv::MemoryBudget::Kind;

namespace {

constexpr std::size_t kConns = 5;
constexpr std::size_t kLimit = rdzv::MemoryBudget::kMinLimit;  // 1 MiB: reachable in a few steps

struct Conn {
  rdzv::ClientId id = 0;
  rdzv::RequestParser parser;
  std::unique_ptr<rdzv::ConnectionCharge> charge;
  bool fresh = true;  // nothing sent yet: a generated request starts with VALIDATE
};

class Harness {
 public:
  Harness() : budget_(kLimit) {
    for (auto& c : conns_) open(c);
  }

  void step(std::uint8_t selector, std::uint8_t arg, std::string_view raw) {
    Conn& c = conns_[(selector & 7) % kConns];
    switch ((selector >> 3) & 3) {
      case 0:
        feed(c, raw);
        break;
      case 1:
        c.charge->sent(std::min<std::size_t>(c.charge->unsent(), std::size_t{arg} * 1024));
        break;
      case 2:
        close(c);
        break;
      case 3:
        feed(c, generated(c, arg, (selector >> 5) & 1));
        break;
    }
    check();
  }

 private:
  void open(Conn& c) {
    c.id = next_id_++;
    c.parser = rdzv::RequestParser{};
    c.charge = std::make_unique<rdzv::ConnectionCharge>(budget_);
    c.fresh = true;
    state_.connect(c.id);
  }

  void close(Conn& c) {
    state_.disconnect(c.id);
    c.charge->release_all();
    open(c);
  }

  Conn* find(rdzv::ClientId id) {
    for (auto& c : conns_)
      if (c.id == id) return &c;
    return nullptr;
  }

  static std::string generated(Conn& c, std::uint8_t arg, int key_pick) {
    std::string out;
    if (c.fresh) {
      rdzv::put_u8(out, static_cast<std::uint8_t>(rdzv::QueryType::Validate));
      rdzv::put_u32(out, rdzv::kValidationMagic);
    }
    const std::string key = key_pick ? "/b" : "/a";
    const std::string value(static_cast<std::size_t>(arg >> 3) * 16 * 1024, 'v');
    rdzv::Request r;
    r.keys = {key};
    switch (arg & 7) {
      case 0:
      case 7:
        r.type = rdzv::QueryType::Set;
        r.values = {value};
        break;
      case 1:
        r.type = rdzv::QueryType::Append;
        r.values = {value};
        break;
      case 2:
        r.type = rdzv::QueryType::Get;
        break;
      case 3:
        r.type = rdzv::QueryType::MultiGet;
        r.keys = {key, key, key, key};
        break;
      case 4:
        r.type = rdzv::QueryType::QueuePush;
        r.values = {value};
        break;
      case 5:
        r.type = rdzv::QueryType::Wait;
        break;
      case 6:
        r.type = rdzv::QueryType::MultiSet;
        r.keys = {key + "1", key + "2"};
        r.values = {value, value};
        break;
    }
    const std::string bytes = rdzv::encode_request(r);
    out += (arg & 7) == 7 ? bytes.substr(0, bytes.size() / 2) : bytes;
    return out;
  }

  // What ServerConnection::handle_input and TcpStoreServer::handle do with one chunk.
  void feed(Conn& c, std::string_view input) {
    c.fresh = false;
    std::vector<rdzv::Outgoing> out;
    try {
      rdzv::Request request;
      while (c.parser.parse(input, request)) {
        c.charge->buffer(0);
        const rdzv::RequestCost cost = state_.cost(request);
        const std::size_t before = state_.stored_bytes();
        if (!budget_.refusal(cost.stored, cost.reply).empty()) return close(c);
        out.clear();
        try {
          state_.handle(c.id, std::move(request), out);
        } catch (const rdzv::ProtocolError&) {
          DDP_ASSERT(state_.stored_bytes() == before, "a failed request changed the stored bytes");
          throw;
        }
        const std::size_t after = state_.stored_bytes();
        DDP_ASSERT(after <= before + cost.stored, "stored bytes grew by " + std::to_string(after - before) +
                                                      ", over the cost of " + std::to_string(cost.stored));
        budget_.adjust(Kind::Stored, budget_.used(Kind::Stored), after);
        std::size_t own = 0;
        for (const auto& o : out) {
          Conn* to = find(o.client);
          DDP_ASSERT(to != nullptr, "reply to unknown connection " + std::to_string(o.client));
          if (o.client == c.id) {
            own += o.bytes.size();
          } else {
            DDP_ASSERT(o.bytes.size() == 1, "a woken waiter gets one byte");
            woken_ += 1;
          }
          to->charge->queued(o.bytes.size());
        }
        // Its own reply, plus a STOP_WAITING if its own write completed its parked WAIT.
        DDP_ASSERT(own <= cost.reply + 1,
                   "reply of " + std::to_string(own) + " bytes over its cost of " + std::to_string(cost.reply));
        woken_ += own > cost.reply ? own - cost.reply : 0;
      }
      if (!c.charge->buffer(c.parser.buffered_bytes())) close(c);
    } catch (const rdzv::ProtocolError&) {
      close(c);  // what the server does: close that connection, forget its waits
    }
  }

  void check() {
    std::size_t buffered = 0;
    std::size_t unsent = 0;
    for (const auto& c : conns_) {
      buffered += c.charge->buffered();
      unsent += c.charge->unsent();
      DDP_ASSERT(c.charge->buffered() == c.parser.buffered_bytes(), "charged partial request differs");
    }
    DDP_ASSERT(buffered == budget_.used(Kind::Buffered), "buffered count differs from the connections' sum");
    DDP_ASSERT(unsent == budget_.used(Kind::Unsent), "unsent count differs from the connections' sum");
    DDP_ASSERT(state_.stored_bytes() == budget_.used(Kind::Stored), "stored count differs from the state's");
    DDP_ASSERT(budget_.used() <= kLimit + woken_, "budget passed: " + budget_.describe());
    DDP_ASSERT(state_.num_clients() == kConns, "state knows a closed connection or misses an open one");
    DDP_ASSERT(state_.num_waiting() <= state_.num_clients(), "more waiters than connections");
    DDP_ASSERT((state_.num_parked_keys() == 0) == (state_.num_waiting() == 0),
               "parked keys without parked connections, or the reverse");
  }

  rdzv::MemoryBudget budget_;  // before the connections: their charges release into it
  rdzv::StoreState state_;
  rdzv::ClientId next_id_ = 1;
  Conn conns_[kConns];
  std::size_t woken_ = 0;  // STOP_WAITING bytes delivered without a budget check
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Harness harness;
  std::size_t pos = 0;
  while (pos + 2 <= size) {
    const std::uint8_t selector = data[pos];
    const std::uint8_t arg = data[pos + 1];
    pos += 2;
    std::string_view raw;
    if (((selector >> 3) & 3) == 0) {
      const std::size_t len = std::min<std::size_t>(arg, size - pos);
      raw = std::string_view(reinterpret_cast<const char*>(data + pos), len);
      pos += len;
    }
    harness.step(selector, arg, raw);
  }
  return 0;
}
