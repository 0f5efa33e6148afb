// See status_access.hpp.
#include "launcher/status/status_access.hpp"

#include "launcher/rdzv/job_secret.hpp"

namespace ddp::launcher {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// "%41+b" is "A b"; a broken escape is kept as it is.
std::string unescape(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && hex_value(s[i + 1]) >= 0 && hex_value(s[i + 2]) >= 0) {
      out += static_cast<char>(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

std::string page_token(std::string_view secret, std::string_view run_id) {
  if (secret.empty()) return "";
  return to_hex(hmac_sha256(secret, "ddplaunch status page\n" + std::string(run_id))).substr(0, 32);
}

RequestTarget parse_target(std::string_view target) {
  RequestTarget out;
  const std::size_t q = target.find('?');
  out.path = std::string(target.substr(0, q));
  if (q == std::string_view::npos) return out;
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    const std::size_t amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    const std::size_t eq = pair.find('=');
    const std::string key = unescape(pair.substr(0, eq));
    if (!key.empty()) out.query.emplace(key, eq == std::string_view::npos ? "" : unescape(pair.substr(eq + 1)));
    if (amp == std::string_view::npos) break;
    rest = rest.substr(amp + 1);
  }
  return out;
}

bool has_token(const std::string& token, const RequestTarget& target, std::string_view authorization) {
  if (token.empty()) return true;
  if (const auto it = target.query.find("token"); it != target.query.end() && same_bytes(it->second, token))
    return true;
  constexpr std::string_view kBearer = "Bearer ";
  return authorization.substr(0, kBearer.size()) == kBearer && same_bytes(authorization.substr(kBearer.size()), token);
}

}  // namespace ddp::launcher
