// See job_secret.hpp.
#include "launcher/rdzv/job_secret.hpp"

#include <fcntl.h>
#include <sodium/crypto_auth_hmacsha256.h>
#include <sodium/utils.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "common/log.hpp"
#include "ddplaunch/common/error.hpp"
#include "launcher/config/file_flag.hpp"

namespace ddp::launcher {
namespace {

// Closes a descriptor when the read ends, whichever way.
struct FdCloser {
  int fd;
  ~FdCloser() { ::close(fd); }
};

}  // namespace

std::string read_secret_file(const std::string& flag, const std::string& path, const std::string& what) {
  const auto unreadable = [&](int err) {
    return UsageError(fmt::format("{}={} cannot be read ({}); give a readable file holding {}", flag, path,
                                  std::strerror(err), what));
  };
  // Opened non-blocking and checked on the descriptor (file_flag.hpp): a FIFO, a device or a
  // directory is refused without reading, and nothing blocks.
  const int fd = open_file_flag(FileFlag{flag, path, FileUse::Read, what}, O_RDONLY);
  const FdCloser closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw unreadable(errno);
  // One byte over the limit tells a file that is too long (st_size is not trusted: the file may
  // grow after the fstat).
  std::string secret;
  if (!read_at_most(fd, kMaxSecretFileBytes + 1, secret)) throw unreadable(errno);
  if (secret.size() > kMaxSecretFileBytes) {
    throw UsageError(fmt::format("{}={} is longer than {} bytes; give a file holding only {}", flag, path,
                                 kMaxSecretFileBytes, what));
  }
  if (!secret.empty() && secret.back() == '\n') secret.pop_back();
  if (!secret.empty() && secret.back() == '\r') secret.pop_back();
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    log::warning("{} file {} is readable by other users (mode {:o}); chmod 600 it", what, path, st.st_mode & 0777);
  }
  return secret;
}

std::string load_job_secret(const std::map<std::string, std::string>& conf, const EnvLookup& env) {
  const auto file = conf.find("token_file");
  const auto from_env = env(kSecretEnv);
  if (file != conf.end() && from_env) {
    throw UsageError(fmt::format("both {} and --rdzv_conf token_file={} give a job secret; use one of them", kSecretEnv,
                                 file->second));
  }
  std::string secret;
  std::string source;
  if (file != conf.end()) {
    secret = read_secret_file("--rdzv_conf token_file", file->second, "the job secret");
    source = "--rdzv_conf token_file=" + file->second;
  } else if (from_env) {
    secret = *from_env;
    source = kSecretEnv;
  } else {
    return "";
  }
  if (secret.size() < kMinSecretBytes) {
    throw UsageError(fmt::format("the job secret from {} is {} byte(s); use at least {} (e.g. openssl rand -hex 32)",
                                 source, secret.size(), kMinSecretBytes));
  }
  return secret;
}

std::string hmac_sha256(std::string_view key, std::string_view data) {
  // libsodium's HMAC-SHA256 takes a key of any length (hashed first when longer than a block,
  // as RFC 2104 says) and needs no sodium_init() (it uses no random numbers or CPU dispatch).
  crypto_auth_hmacsha256_state state;
  unsigned char mac[crypto_auth_hmacsha256_BYTES];
  const bool ok =
      crypto_auth_hmacsha256_init(&state, reinterpret_cast<const unsigned char*>(key.data()), key.size()) == 0 &&
      crypto_auth_hmacsha256_update(&state, reinterpret_cast<const unsigned char*>(data.data()), data.size()) == 0 &&
      crypto_auth_hmacsha256_final(&state, mac) == 0;
  sodium_memzero(&state, sizeof state);
  DDP_ASSERT(ok, "HMAC-SHA256 failed in libsodium");
  return std::string(reinterpret_cast<const char*>(mac), sizeof mac);
}

std::string to_hex(std::string_view bytes) {
  std::string hex(bytes.size() * 2 + 1, '\0');
  sodium_bin2hex(hex.data(), hex.size(), reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  hex.pop_back();
  return hex;
}

bool same_bytes(std::string_view a, std::string_view b) {
  return a.size() == b.size() && sodium_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string store_namespace(std::string_view secret) {
  if (secret.empty()) return "ddplaunch";
  return "ddplaunch/" + to_hex(hmac_sha256(secret, "ddplaunch store namespace v1")).substr(0, 32);
}

rendezvous::StoreAuth store_auth(const std::string& secret) {
  rendezvous::StoreAuth auth;
  auth.expect_none = secret.empty();  // a client without the secret says why a store with one closes it
  if (secret.empty()) return auth;
  auth.protected_prefix = "/" + store_namespace("") + "/";
  auth.prove = [secret](std::string_view challenge) {
    return to_hex(hmac_sha256(secret, "ddplaunch store auth v1\n" + std::string(challenge)));
  };
  return auth;
}

}  // namespace ddp::launcher
