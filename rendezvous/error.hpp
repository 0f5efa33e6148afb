// Error types of the rendezvous library, the base of the project's one error policy.
//
// Anything that can go wrong at run time (a peer gone, a timeout, malformed bytes on the wire,
// a port already taken) is reported by throwing one of these; every message starts lower-case
// and carries the values involved (key, endpoint, elapsed time) and, where there is one, the fix.
// Broken invariants (bugs) are not exceptions: they abort through DDP_ASSERT below.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace ddp::rendezvous {

// Base of every run-time error thrown by ddplaunch libraries.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A blocking call hit its deadline (wait, get, connect, a reply that never came).
class TimeoutError : public Error {
 public:
  using Error::Error;
};

// The peer is unreachable or went away (connect refused until the deadline, connection reset,
// the server stopped in the middle of a request).
class ConnectionError : public Error {
 public:
  using Error::Error;
};

// Bytes on the wire that break the protocol: unknown query type, bad handshake, a field over
// its limit, a counter that is not a decimal number.
class ProtocolError : public Error {
 public:
  using Error::Error;
};

// Binding a listening socket failed (port taken, address not local).
class BindError : public Error {
 public:
  using Error::Error;
};

}  // namespace ddp::rendezvous

// Enforce-style assertion for invariants: prints the condition and message, then aborts.
#define DDP_ASSERT(cond, msg)                                                                          \
  do {                                                                                                 \
    if (!(cond)) {                                                                                     \
      std::fprintf(stderr, "ddplaunch: internal error at %s:%d: %s (%s)\n", __FILE__, __LINE__, #cond, \
                   std::string(msg).c_str());                                                          \
      std::abort();                                                                                    \
    }                                                                                                  \
  } while (0)
