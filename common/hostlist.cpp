// Slurm host list expansion and the default port rule (see hostlist.hpp).
#include "common/hostlist.hpp"

#include <charconv>
#include <cstddef>

#include "common/worker_env.hpp"
#include "ddplaunch/common/error.hpp"

namespace ddp {
namespace {

std::vector<std::string> split_top_level(const std::string& s, const std::string& whole) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  for (char c : s) {
    if (c == '[') ++depth;
    if (c == ']' && --depth < 0) throw UsageError("Slurm host list '" + whole + "' has an unbalanced ']'");
    if (c == ',' && depth == 0) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (depth != 0) throw UsageError("Slurm host list '" + whole + "' has an unbalanced '['");
  out.push_back(cur);
  return out;
}

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// The values of one bracket group "01-03,7" as strings, zero padding kept.
std::vector<std::string> expand_group(const std::string& group, const std::string& whole) {
  if (group.empty()) throw UsageError("Slurm host list '" + whole + "' has an empty range '[]'");
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= group.size()) {
    std::size_t comma = group.find(',', start);
    if (comma == std::string::npos) comma = group.size();
    const std::string item = group.substr(start, comma - start);
    const std::size_t dash = item.find('-');
    const std::string lo = item.substr(0, dash);
    const std::string hi = dash == std::string::npos ? lo : item.substr(dash + 1);
    if (!all_digits(lo) || !all_digits(hi) || lo.size() > 18 || hi.size() > 18)
      throw UsageError("Slurm host list '" + whole + "' has a bad range '" + item + "'");
    const long long a = std::stoll(lo), b = std::stoll(hi);
    if (b < a) throw UsageError("Slurm host list '" + whole + "' has a descending range '" + item + "'");
    if (static_cast<unsigned long long>(b - a) + out.size() >= kMaxHosts)
      throw UsageError("Slurm host list '" + whole + "' expands to more than " + std::to_string(kMaxHosts) + " hosts");
    for (long long v = a; v <= b; ++v) {
      std::string num = std::to_string(v);
      if (num.size() < lo.size()) num.insert(0, lo.size() - num.size(), '0');
      out.push_back(num);
    }
    start = comma + 1;
  }
  return out;
}

}  // namespace

std::vector<std::string> expand_hostlist(const std::string& list) {
  std::vector<std::string> hosts;
  const auto too_many = [&] {
    return UsageError("Slurm host list '" + list + "' expands to more than " + std::to_string(kMaxHosts) + " hosts");
  };
  for (const std::string& entry : split_top_level(list, list)) {
    if (entry.empty()) continue;
    std::vector<std::string> partial{""};
    std::size_t pos = 0;
    while (pos < entry.size()) {
      const std::size_t open = entry.find('[', pos);
      const std::string literal = entry.substr(pos, open == std::string::npos ? std::string::npos : open - pos);
      for (std::string& p : partial) p += literal;
      if (open == std::string::npos) break;
      const std::size_t close = entry.find(']', open);
      const std::vector<std::string> values = expand_group(entry.substr(open + 1, close - open - 1), list);
      if (partial.size() * values.size() > kMaxHosts) throw too_many();
      std::vector<std::string> next;
      next.reserve(partial.size() * values.size());
      for (const std::string& p : partial)
        for (const std::string& v : values) next.push_back(p + v);
      partial = std::move(next);
      pos = close + 1;
    }
    hosts.insert(hosts.end(), partial.begin(), partial.end());
    if (hosts.size() > kMaxHosts) throw too_many();
  }
  return hosts;
}

std::optional<int> master_port_override(const EnvLookup& env) {
  const auto p = env(worker_env::kMasterPort);
  if (!p || p->empty()) return std::nullopt;
  int port = 0;
  const auto [end, ec] = std::from_chars(p->data(), p->data() + p->size(), port);
  if (ec != std::errc() || end != p->data() + p->size() || port < 1 || port > 65535)
    throw UsageError("MASTER_PORT=" + *p + " is not a port number; use 1..65535 or unset it");
  return port;
}

int slurm_master_port(const EnvLookup& env) {
  if (auto port = master_port_override(env)) return *port;
  const auto job = env("SLURM_JOB_ID");
  if (!job || job->empty())
    throw UsageError("SLURM_JOB_ID is not set, so there is no default port; set MASTER_PORT or start under Slurm");
  // Digit by digit modulo 20000: exact for ids of any length (no overflow, no pre-reduction).
  int rest = 0;
  for (char ch : *job) {
    if (ch < '0' || ch > '9')
      throw UsageError("SLURM_JOB_ID=" + *job + " is not a number; set MASTER_PORT to choose the port");
    rest = (rest * 10 + (ch - '0')) % 20000;
  }
  return 15000 + rest;
}

}  // namespace ddp
