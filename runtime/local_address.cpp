// See local_address.hpp. connect() on a UDP socket only picks the route and source address.
#include "runtime/local_address.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include "runtime/socket_fd.hpp"

namespace ddp::runtime {

std::string local_address_towards(const std::string& host, std::uint16_t port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0) return "";
  std::string out;
  for (addrinfo* ai = res; ai != nullptr && out.empty(); ai = ai->ai_next) {
    SocketFd fd(::socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!fd.valid() || ::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) continue;
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &len) != 0) continue;
    char buf[INET6_ADDRSTRLEN] = {};
    const void* addr = local.ss_family == AF_INET6
                           ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(&local)->sin6_addr)
                           : static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(&local)->sin_addr);
    if (::inet_ntop(local.ss_family, addr, buf, sizeof buf) != nullptr) out = buf;
  }
  ::freeaddrinfo(res);
  return out;
}

}  // namespace ddp::runtime
