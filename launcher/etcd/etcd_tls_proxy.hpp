// TLS to etcd without OpenSSL in the launcher: ddplaunch-etcd-tls, a small proxy that ddplaunch
// starts only when --rdzv_conf gives TLS keys (cacert, cert, key, protocol=https). Linking OpenSSL
// into ddplaunch itself would cost every launch, TLS or not, about 0.3 ms and 19,000 relocations
// (measured for issue 15); the proxy is an executable of its own, so nothing of OpenSSL is loaded
// otherwise.
// For each etcd member it listens on a free loopback port; a connection there is accepted only
// from this user (the owner of the connecting socket, looked up in /proc/net/tcp: a loopback TCP
// peer has no SO_PEERCRED), opens a TLS connection to the member (its certificate checked
// against the CA and the member's host name or IP, the client certificate presented when given)
// and relays bytes both ways until either side closes. The launcher's etcd client talks plain
// HTTP to those ports, so its failover between members is unchanged.
// Errors of one connection (a handshake that fails, a member that is down) are printed on stderr
// with the member's address and end that connection only; the client then tries the next member.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ddp::launcher {

struct EtcdTlsOptions {
  std::vector<std::string> members;  // "host:port" of each etcd member ("[v6]:port" for IPv6)
  std::string ca_file;               // "": the system's trusted certificates
  std::string cert_file;             // client certificate ("" : none)
  std::string key_file;              // its private key
};

class EtcdTlsProxy {
 public:
  // Loads the certificates and binds one loopback port per member. Throws UsageError naming a
  // file that cannot be loaded, or a member that is not HOST:PORT.
  explicit EtcdTlsProxy(const EtcdTlsOptions& options);
  ~EtcdTlsProxy();
  EtcdTlsProxy(const EtcdTlsProxy&) = delete;
  EtcdTlsProxy& operator=(const EtcdTlsProxy&) = delete;

  // The loopback port for each member, in order.
  std::vector<std::uint16_t> ports() const;
  // Serves until stop() (from another thread) or the process ends. Blocks.
  void run();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ddp::launcher
