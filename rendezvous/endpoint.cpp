// See endpoint.hpp.
#include "ddplaunch/rendezvous/endpoint.hpp"

namespace ddp::rendezvous {

std::string unbracket_host(const std::string& host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    return host.substr(1, host.size() - 2);
  }
  return host;
}

std::string format_endpoint(const std::string& host, std::uint16_t port) {
  const std::string bare = unbracket_host(host);
  const bool v6 = bare.find(':') != std::string::npos;
  return (v6 ? "[" + bare + "]" : bare) + ":" + std::to_string(port);
}

}  // namespace ddp::rendezvous
