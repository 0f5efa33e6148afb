// Error types of the store and its clients. All derive from ddp::Error (the project's one error
// policy, ddplaunch/common/error.hpp): anything that can go wrong at run time is thrown; every
// message starts lower-case and carries the values involved and, where there is one, the fix.
#pragma once

#include <string>
#include <utility>

#include "ddplaunch/common/error.hpp"

namespace ddp::rendezvous {

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

// The store refused this client's proof of the job secret, or cannot check one (store_auth.hpp).
// Not retried: another attempt gives the same answer.
class AuthError : public Error {
 public:
  using Error::Error;
};

// The store refuses connections from this host's address: a static job's round formed without
// it (TcpStoreServer::allow_only), whatever job secret the client has. Not retried. Carries the
// store's endpoint and this host's address, for callers that say why in their own words.
class RefusedError : public Error {
 public:
  RefusedError(const std::string& message, std::string store, std::string host)
      : Error(message), store_(std::move(store)), host_(std::move(host)) {}
  const std::string& store() const { return store_; }  // "10.0.0.1:29500"
  const std::string& host() const { return host_; }    // this host's address towards it

 private:
  std::string store_;
  std::string host_;
};

// Binding a listening socket failed (port taken, address not local).
class BindError : public Error {
 public:
  using Error::Error;
};

// The port is taken (EADDRINUSE): another process listens there, perhaps another launcher of the
// same job on this machine (cli/c10d_ranks.hpp's guess, which torchrun's c10d also falls back from).
class AddressInUseError : public BindError {
 public:
  using BindError::BindError;
};

}  // namespace ddp::rendezvous
