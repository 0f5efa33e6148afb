// The job secret: an optional shared key that authenticates the launchers of one job to each
// other through the store (signed_store.hpp). It comes from DDPLAUNCH_RDZV_TOKEN or from the file
// named by --rdzv_conf token_file=PATH, never from the command line, where `ps` shows it to every
// user of the machine. Workers never see it: it is removed from their environment.
//
// HMAC-SHA256 comes from libsodium (linked statically: only its SHA-256 and HMAC objects). Everything here is pure or
// reads one file; nothing blocks beyond that, and all functions are thread-safe.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "ddplaunch/common/env_lookup.hpp"
#include "ddplaunch/rendezvous/store_auth.hpp"
#include "launcher/config/private_env.hpp"

namespace ddp::launcher {

inline constexpr std::size_t kMinSecretBytes = 16;
// A secret or password file longer than this is refused: a secret is tens of bytes, and a file
// that never ends (/dev/zero) must not be read into memory.
inline constexpr std::size_t kMaxSecretFileBytes = 4096;

// The job secret for this launcher: the contents of rdzv_conf["token_file"] (one trailing
// newline removed) or else $DDPLAUNCH_RDZV_TOKEN; "" when neither is given (no authentication).
// Throws UsageError, naming the file or variable and the fix, when both are given, the file
// cannot be read, or the secret is shorter than kMinSecretBytes. Warns (log) when the file is
// readable by other users.
std::string load_job_secret(const std::map<std::string, std::string>& rdzv_conf, const EnvLookup& env);

// The contents of a file holding a secret (one trailing newline removed), named by `flag` (e.g.
// "--rdzv_conf token_file") in errors. Only a regular file (or a symlink to one) of at most
// kMaxSecretFileBytes is read; a directory, a device (/dev/zero) or a FIFO is refused without
// reading (a FIFO is opened non-blocking, so nothing blocks). Throws UsageError naming the file
// and saying `what` it should hold when it cannot be read, is not a regular file or is too long;
// then warns (log) when other users may read it.
std::string read_secret_file(const std::string& flag, const std::string& path, const std::string& what);

// HMAC-SHA256 of `data` under `key`: 32 raw bytes.
std::string hmac_sha256(std::string_view key, std::string_view data);

// Lower-case hexadecimal of `bytes`.
std::string to_hex(std::string_view bytes);

// Constant-time equality of two byte strings of the same length (false when lengths differ).
bool same_bytes(std::string_view a, std::string_view b);

// The store namespace of a job with this secret: "ddplaunch/<32 hex digits derived from the
// secret>", or "ddplaunch" without one. Launchers without the secret cannot name the keys.
std::string store_namespace(std::string_view secret);

// The store authentication of a job with this secret (store_auth.hpp): every ddplaunch key
// ("/ddplaunch/..." on the wire) is for proven connections only, and the proof of a challenge is
// its HMAC-SHA256 under the secret. Without a secret: no authentication, and a client that
// stops with AuthError when the store wants a secret (expect_none).
rendezvous::StoreAuth store_auth(const std::string& secret);

}  // namespace ddp::launcher
