// One TCPStore request in one expression, for the tests of the codec and of the server state.
// Request (rendezvous/request.hpp) is an aggregate, but initialising it in braces without every
// field draws -Wmissing-field-initializers, and most requests use only two of its four fields.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "rendezvous/request.hpp"

namespace ddp::testing {

inline rendezvous::Request make_request(rendezvous::QueryType type, std::vector<std::string> keys = {},
                                        std::vector<std::string> values = {}, std::int64_t integer = 0) {
  rendezvous::Request r;
  r.type = type;
  r.keys = std::move(keys);
  r.values = std::move(values);
  r.integer = integer;
  return r;
}

}  // namespace ddp::testing
