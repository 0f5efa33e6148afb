// The project's one error policy, shared by every library (common, rendezvous, launcher, runtime).
//
// Two tiers. Anything that can go wrong at run time (a bad flag, a port already taken, a peer
// gone, a timeout, malformed bytes) is an exception derived from ddp::Error; every message starts
// lower-case, carries the values involved and, where there is one, the fix. Broken invariants
// (bugs) are not exceptions: they abort through DDP_ASSERT, which names the condition and values.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace ddp {

// Base of every run-time error thrown by ddplaunch libraries.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad command line, configuration or environment given by the user: executables exit with
// kExitUsage (2) and this one-line message.
class UsageError : public Error {
 public:
  using Error::Error;
};

}  // namespace ddp

// Enforce-style assertion for invariants: prints the condition and message, then aborts.
#define DDP_ASSERT(cond, msg)                                                                          \
  do {                                                                                                 \
    if (!(cond)) {                                                                                     \
      std::fprintf(stderr, "ddplaunch: internal error at %s:%d: %s (%s)\n", __FILE__, __LINE__, #cond, \
                   std::string(msg).c_str());                                                          \
      std::abort();                                                                                    \
    }                                                                                                  \
  } while (0)
