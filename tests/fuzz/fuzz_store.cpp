// libFuzzer target over the wire codec and the server state together.
//
// The input is a script of (client, chunk) steps: byte 0 of each step picks one of three
// connections (its low bits) and whether it first sends a valid VALIDATE (bit 7, so deep
// states are reachable), byte 1 is the chunk length, then the chunk itself is fed to that
// connection's RequestParser. Every complete request goes to one shared StoreState, just as the
// server does. A ProtocolError closes that connection (disconnect + a fresh id), as the server
// does. Invariants checked after every step: each parsed request re-encodes to bytes that parse
// back to the same request, no reply goes to an unknown connection, the waiter count never
// exceeds the connection count, and some key has waiters exactly when some connection is
// parked. Sanitizers catch the rest.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ddplaunch/rendezvous/error.hpp"
#include "rendezvous/request_parser.hpp"
#include "rendezvous/store_state.hpp"

namespace rdzv = ddp::rendezvous;

namespace {

struct Conn {
  rdzv::ClientId id = 0;
  rdzv::RequestParser parser;
  bool fresh = true;
};

void check_round_trip(const rdzv::Request& request) {
  const std::string bytes = rdzv::encode_request(request);
  std::string_view view(bytes);
  rdzv::RequestParser parser;
  rdzv::Request again;
  DDP_ASSERT(parser.parse(view, again), "re-encoded request did not parse");
  DDP_ASSERT(view.empty(), "re-encoded request left bytes behind");
  DDP_ASSERT(again == request, "re-encoded request parsed differently");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  rdzv::StoreState state;
  rdzv::ClientId next_id = 1;
  Conn conns[3];
  for (auto& c : conns) {
    c.id = next_id++;
    state.connect(c.id);
  }
  std::size_t pos = 0;
  std::vector<rdzv::Outgoing> out;
  while (pos + 2 <= size) {
    const std::uint8_t selector = data[pos];
    const std::size_t len = std::min<std::size_t>(data[pos + 1], size - pos - 2);
    pos += 2;
    Conn& c = conns[(selector & 0x7F) % 3];
    std::string chunk;
    if ((selector & 0x80) && c.fresh) {
      rdzv::Request hello;
      hello.type = rdzv::QueryType::Validate;
      hello.integer = rdzv::kValidationMagic;
      chunk = rdzv::encode_request(hello);
    }
    c.fresh = false;
    chunk.append(reinterpret_cast<const char*>(data + pos), len);
    pos += len;
    std::string_view input(chunk);
    try {
      rdzv::Request request;
      while (c.parser.parse(input, request)) {
        check_round_trip(request);
        out.clear();
        state.handle(c.id, std::move(request), out);
        for (const auto& o : out) {
          bool known = false;
          for (const auto& other : conns) known = known || other.id == o.client;
          DDP_ASSERT(known, "reply to unknown connection " + std::to_string(o.client));
        }
      }
    } catch (const rdzv::ProtocolError&) {
      // What the server does: close that connection, forget its waits; a new peer connects.
      state.disconnect(c.id);
      c = Conn{};
      c.id = next_id++;
      state.connect(c.id);
    }
    DDP_ASSERT(state.num_waiting() <= state.num_clients(), "more waiters than connections");
    DDP_ASSERT((state.num_parked_keys() == 0) == (state.num_waiting() == 0),
               "parked keys without parked connections, or the reverse");
  }
  return 0;
}
