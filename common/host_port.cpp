// HOST:PORT text → host and port; see host_port.hpp.
#include "common/host_port.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

#include <fmt/format.h>

#include "ddplaunch/common/error.hpp"

namespace ddp {
namespace {

bool all_of(std::string_view text, int (*pred)(int)) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [&](char ch) { return pred(static_cast<unsigned char>(ch)) != 0; });
}

int is_name_char(int ch) {
  return std::isalnum(ch) || ch == '_' || ch == '.' || ch == '-';
}

// Inside brackets: hex groups, colons, and the dots of an embedded IPv4 ("::ffff:10.0.0.1").
int is_v6_char(int ch) {
  return std::isxdigit(ch) || ch == ':' || ch == '.';
}

}  // namespace

std::optional<HostPort> try_parse_host_port(std::string_view text) {
  std::string_view host, rest;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = text.substr(1, close - 1);
    rest = text.substr(close + 1);
    // A link-local address may carry its zone: "[fe80::1%eth0]".
    const auto percent = host.find('%');
    const bool zone_ok = percent == std::string_view::npos || all_of(host.substr(percent + 1), is_name_char);
    if (!all_of(host.substr(0, percent), is_v6_char) || !zone_ok) return std::nullopt;
  } else {
    const auto colon = std::min(text.find(':'), text.size());
    host = text.substr(0, colon);
    rest = text.substr(colon);
    if (!all_of(host, is_name_char)) return std::nullopt;
  }
  HostPort out{std::string(host), std::nullopt};
  if (rest.empty()) return out;
  const std::string_view digits = rest.substr(1);
  if (rest.front() != ':' || digits.size() > 5 || !all_of(digits, [](int ch) { return std::isdigit(ch); })) {
    return std::nullopt;
  }
  unsigned port = 0;
  std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (port > 65535) return std::nullopt;
  out.port = static_cast<std::uint16_t>(port);
  return out;
}

HostPort parse_host_port(std::string_view text, const HostPortRules& rules) {
  std::optional<HostPort> parsed = try_parse_host_port(text);
  if (parsed && !parsed->port) parsed->port = rules.default_port;
  const bool port_optional = rules.default_port || !rules.port_required;
  if (parsed && (parsed->port || port_optional)) return *parsed;
  const std::string subject = rules.name.substr(0, 2) == "--" ? fmt::format("{}={}", rules.name, text)
                                                              : fmt::format("{} '{}'", rules.name, text);
  throw UsageError(fmt::format("{} is not {} (a name or address, IPv6 in brackets, port 0..65535); {}", subject,
                               port_optional ? "host[:port]" : "host:port", rules.fix));
}

}  // namespace ddp
