// Host and endpoint spelling shared by the store's server, its client and the launcher: writing
// "host:port" (IPv6 in brackets) and taking the brackets off a host. Reading HOST:PORT text is
// common/host_port.hpp's job, which parses what format_endpoint() writes.
#pragma once

#include <cstdint>
#include <string>

namespace ddp::rendezvous {

// Strips brackets of "[::1]"; other hosts are returned unchanged. Pure.
std::string unbracket_host(const std::string& host);
// "host:port", bracketing IPv6 literals. Pure.
std::string format_endpoint(const std::string& host, std::uint16_t port);

}  // namespace ddp::rendezvous
