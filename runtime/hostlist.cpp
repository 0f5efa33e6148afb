// Slurm host list expansion for DistEnv's Slurm path (see hostlist.hpp).
#include "runtime/hostlist.hpp"

#include <cstddef>
#include <string>
#include <vector>

#include "ddplaunch/dist_env.hpp"

namespace ddp::runtime {
namespace {

constexpr std::size_t kMaxHosts = 1'000'000;

std::vector<std::string> split_top_level(const std::string& s, const std::string& whole) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  for (char c : s) {
    if (c == '[') ++depth;
    if (c == ']' && --depth < 0) throw EnvError("unbalanced ']' in host list '" + whole + "'");
    if (c == ',' && depth == 0) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (depth != 0) throw EnvError("unbalanced '[' in host list '" + whole + "'");
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
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= group.size()) {
    std::size_t comma = group.find(',', start);
    if (comma == std::string::npos) comma = group.size();
    const std::string item = group.substr(start, comma - start);
    const std::size_t dash = item.find('-');
    const std::string lo = item.substr(0, dash);
    const std::string hi = dash == std::string::npos ? lo : item.substr(dash + 1);
    if (!all_digits(lo) || !all_digits(hi) || lo.size() > 9 || hi.size() > 9)
      throw EnvError("bad range '" + item + "' in host list '" + whole + "'");
    const long a = std::stol(lo), b = std::stol(hi);
    if (b < a) throw EnvError("descending range '" + item + "' in host list '" + whole + "'");
    if (static_cast<std::size_t>(b - a) + out.size() >= kMaxHosts)
      throw EnvError("host list '" + whole + "' expands to too many hosts");
    for (long v = a; v <= b; ++v) {
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
      if (partial.size() * values.size() > kMaxHosts)
        throw EnvError("host list '" + list + "' expands to too many hosts");
      std::vector<std::string> next;
      next.reserve(partial.size() * values.size());
      for (const std::string& p : partial)
        for (const std::string& v : values) next.push_back(p + v);
      partial = std::move(next);
      pos = close + 1;
    }
    hosts.insert(hosts.end(), partial.begin(), partial.end());
    if (hosts.size() > kMaxHosts) throw EnvError("host list '" + list + "' expands to too many hosts");
  }
  return hosts;
}

}  // namespace ddp::runtime
