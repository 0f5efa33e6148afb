// The one parser of HOST:PORT text, for every endpoint ddplaunch reads: --rdzv_endpoint, the etcd
// members (the launcher's client and the TLS proxy), and an address a rank or a launcher
// published. Written once here because the launcher and the runtime both read such text.
// The spellings: "host", "host:port", "[v6]" and "[v6]:port", where a host is a name or an IPv4
// address of [A-Za-z0-9_.-] or an IPv6 address in brackets (with a zone: "[fe80::1%eth0]"), and a
// port is 0..65535 in decimal.
// Writing one is rendezvous::format_endpoint's job (ddplaunch/rendezvous/endpoint.hpp), which
// brackets IPv6 the same way, so what it writes parses back here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ddp {

struct HostPort {
  std::string host;                   // without brackets: "node3", "10.0.0.1", "::1"
  std::optional<std::uint16_t> port;  // empty only when the text has none and no default applies
};

// `text` as a HostPort, or nullopt unless the whole text is one of the spellings above (an empty
// host, a port over 65535 or with other than 1-5 digits, an IPv6 address outside brackets: none).
// Pure; never throws.
std::optional<HostPort> try_parse_host_port(std::string_view text);

// How one caller reads HOST:PORT text, and how its message names the text and the remedy.
struct HostPortRules {
  // Names the text in the message: a flag ("--rdzv_endpoint", shown as --rdzv_endpoint=TEXT) or
  // a noun ("etcd endpoint", shown as etcd endpoint 'TEXT').
  std::string_view name = {};
  std::string_view fix = {};                                 // ends the message: "e.g. 127.0.0.1:2379"
  std::optional<std::uint16_t> default_port = std::nullopt;  // the port when the text has none
  bool port_required = false;                                // without a default: a text with no port is an error
};

// try_parse_host_port() with `rules` applied: the default port filled in, a missing port refused
// when it is required. Pure. Throws UsageError "NAME=TEXT is not host[:port] (...); FIX"
// ("host:port" when the port is required), which names the text, the spelling and the fix.
HostPort parse_host_port(std::string_view text, const HostPortRules& rules);

}  // namespace ddp
