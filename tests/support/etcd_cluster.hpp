// Real etcd servers for tests (Debian's etcd-server): a cluster of members on free loopback
// ports with a private data directory, killed and removed at destruction. Clients retry until the
// members are up (each EtcdClient call fails over and waits up to its timeout).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "launcher/etcd/etcd_client.hpp"
#include "tests/support/child_process.hpp"

namespace ddp::testing {

using ddp::launcher::EtcdClient;
using ddp::launcher::EtcdClientOptions;

constexpr const char* kEtcd = "/usr/bin/etcd";

inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t n = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
  ::close(fd);
  return ntohs(a.sin_port);
}

// A cluster of `size` etcd members on loopback; members[i] answers clients on client_ports[i].
struct EtcdCluster {
  std::filesystem::path dir;
  std::vector<int> client_ports;
  std::vector<std::unique_ptr<ChildProcess>> members;

  explicit EtcdCluster(int size) {
    char tmpl[] = "/tmp/ddp_etcd_XXXXXX";
    dir = ::mkdtemp(tmpl);
    std::vector<int> peer_ports;
    std::string initial;
    for (int i = 0; i < size; ++i) {
      client_ports.push_back(free_port());
      peer_ports.push_back(free_port());
      initial += (i ? "," : "") + std::string("m") + std::to_string(i) +
                 "=http://127.0.0.1:" + std::to_string(peer_ports.back());
    }
    for (int i = 0; i < size; ++i) {
      const std::string client = "http://127.0.0.1:" + std::to_string(client_ports[i]);
      const std::string peer = "http://127.0.0.1:" + std::to_string(peer_ports[i]);
      members.push_back(
          std::make_unique<ChildProcess>(std::vector<std::string>{kEtcd,
                                                                  "--name",
                                                                  "m" + std::to_string(i),
                                                                  "--data-dir",
                                                                  (dir / ("m" + std::to_string(i))).string(),
                                                                  "--listen-client-urls",
                                                                  client,
                                                                  "--advertise-client-urls",
                                                                  client,
                                                                  "--listen-peer-urls",
                                                                  peer,
                                                                  "--initial-advertise-peer-urls",
                                                                  peer,
                                                                  "--initial-cluster",
                                                                  initial,
                                                                  "--initial-cluster-state",
                                                                  "new",
                                                                  "--initial-cluster-token",
                                                                  dir.filename().string(),
                                                                  "--log-level",
                                                                  "error"}));
    }
  }
  ~EtcdCluster() {
    members.clear();  // kills and reaps
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  std::vector<std::string> endpoints() const {
    std::vector<std::string> out;
    for (int p : client_ports) out.push_back("127.0.0.1:" + std::to_string(p));
    return out;
  }
  // Options for a client that waits up to `timeout` per call for the cluster to come up (each
  // call fails over and retries).
  EtcdClientOptions options(std::chrono::milliseconds timeout = std::chrono::seconds(30), const std::string& user = "",
                            const std::string& password = "") const {
    EtcdClientOptions o;
    o.endpoints = endpoints();
    o.timeout = timeout;
    o.user = user;
    o.password = password;
    return o;
  }
  EtcdClient client(std::chrono::milliseconds timeout = std::chrono::seconds(30), const std::string& user = "",
                    const std::string& password = "") const {
    return EtcdClient(options(timeout, user, password));
  }
};

}  // namespace ddp::testing
