// Which address of this host a peer can reach: the source address the kernel would use to reach
// the master, found with a connected UDP socket (no packet is sent).
#pragma once

#include <cstdint>
#include <string>

namespace ddp::runtime {

// The local IPv4/IPv6 address routed towards host:port, without brackets. Does not block beyond
// a name lookup of `host`. Returns "" when `host` does not resolve or has no route (the caller
// then falls back to guess_local_address()).
std::string local_address_towards(const std::string& host, std::uint16_t port);

}  // namespace ddp::runtime
