// Authenticated connections to the store: the launchers of a job with a job secret prove it on
// each connection, and only proven connections may touch the keys under a protected prefix
// (the launchers' own records). Every other connection (the workers' PyTorch TCPStore clients, a
// stranger) keeps the plain TCPStore protocol for every other key, and cannot list, read, wait on,
// write or delete a protected key: a request naming one closes the connection.
//
// The handshake, inside the TCPStore protocol after VALIDATE/PING, one challenge per connection:
//   1. the client sends GET kAuthChallengeKey; the server answers a fresh random challenge
//      (32 hex digits) and remembers it for this connection; a server without authentication
//      answers "" (a missing key), which the client reports as such;
//   2. the client sends COMPARE_SET kAuthProofKey, expected = the challenge,
//      desired = prove(challenge); the server answers kAuthAccepted when the proof is right for
//      the challenge it issued, else kAuthDenied. The challenge is used up either way.
// Neither key is ever stored. The proof function is the caller's (an HMAC under the job secret,
// launcher/rdzv/job_secret.hpp), so this library holds no cryptography and no secret.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace ddp::rendezvous {

// Wire keys of the handshake (a leading NUL: no TCPStore client's "/"-prefixed key collides).
inline constexpr std::string_view kAuthChallengeKey{"\0ddplaunch-auth/challenge", 25};
inline constexpr std::string_view kAuthProofKey{"\0ddplaunch-auth/proof", 21};
inline constexpr std::string_view kAuthAccepted = "accepted";
inline constexpr std::string_view kAuthDenied = "denied";

struct StoreAuth {
  // Server: the wire-key prefix (e.g. "/ddplaunch/") that only proven connections may touch.
  // Empty: no authentication (the server answers the handshake as a plain store would).
  std::string protected_prefix;
  // The proof of a challenge; the same function on both sides. Must be pure and thread-safe.
  // Client: empty means the client does not authenticate.
  std::function<std::string(std::string_view challenge)> prove;
  // Client without `prove`: ask for a challenge anyway, and stop (AuthError) when the store gives
  // one, i.e. wants a secret this client lacks, rather than being closed at its first protected key.
  bool expect_none = false;

  bool enabled() const { return static_cast<bool>(prove); }
};

// Constant-time equality of two byte strings (false when the lengths differ).
bool equal_in_constant_time(std::string_view a, std::string_view b);

// A fresh random challenge: 32 lower-case hex digits from the kernel's random source.
std::string new_auth_challenge();

}  // namespace ddp::rendezvous
