// Slurm host lists and environment; see slurm.hpp.
#include "launcher/slurm.hpp"

#include <regex>

namespace ddp::launcher {
namespace {

// Splits at commas that are not inside brackets.
std::vector<std::string> split_top_level(const std::string& list) {
  std::vector<std::string> parts;
  std::string cur;
  int depth = 0;
  for (char ch : list) {
    if (ch == '[') ++depth;
    if (ch == ']') --depth;
    if (depth < 0) throw UsageError("Slurm host list '" + list + "' has an unbalanced ']'");
    if (ch == ',' && depth == 0) {
      if (!cur.empty()) parts.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(ch);
    }
  }
  if (depth != 0) throw UsageError("Slurm host list '" + list + "' has an unbalanced '['");
  if (!cur.empty()) parts.push_back(cur);
  return parts;
}

void expand_one(const std::string& item, std::vector<std::string>& out, const std::string& whole) {
  const auto open = item.find('[');
  if (open == std::string::npos) {
    out.push_back(item);
    return;
  }
  const auto close = item.find(']', open);
  const std::string prefix = item.substr(0, open);
  const std::string suffix = item.substr(close + 1);
  std::vector<std::string> tails;
  expand_one(suffix, tails, whole);  // later bracket groups expand recursively
  std::string ranges = item.substr(open + 1, close - open - 1);
  if (ranges.empty()) throw UsageError("Slurm host list '" + whole + "' has an empty range '[]'");
  std::smatch m;
  for (const auto& range : split_top_level(ranges)) {
    if (std::regex_match(range, m, std::regex("([0-9]{1,9})-([0-9]{1,9})"))) {
      const std::string lo = m[1], hi = m[2];
      const long a = std::stol(lo), b = std::stol(hi);
      if (b < a || b - a > 100000) throw UsageError("Slurm host list '" + whole + "' has a bad range " + range);
      for (long i = a; i <= b; ++i) {
        std::string num = std::to_string(i);
        if (num.size() < lo.size()) num = std::string(lo.size() - num.size(), '0') + num;
        for (const auto& t : tails) out.push_back(prefix + num + t);
      }
    } else if (std::regex_match(range, std::regex("[0-9]{1,18}"))) {
      for (const auto& t : tails) out.push_back(prefix + range + t);
    } else {
      throw UsageError("Slurm host list '" + whole + "' has a bad range '" + range + "'");
    }
  }
}

}  // namespace

std::vector<std::string> expand_hostlist(const std::string& list) {
  std::vector<std::string> out;
  for (const auto& item : split_top_level(list)) {
    if (item.empty()) continue;
    std::vector<std::string> expanded;
    expand_one(item, expanded, list);
    out.insert(out.end(), expanded.begin(), expanded.end());
  }
  return out;
}

int slurm_port(const EnvLookup& env) {
  if (auto p = env("MASTER_PORT")) {
    if (std::regex_match(*p, std::regex("[0-9]{1,5}"))) return std::stoi(*p);
    throw UsageError("MASTER_PORT=" + *p + " is not a port number");
  }
  const std::string job = env("SLURM_JOB_ID").value_or("0");
  long id = 0;
  for (char ch : job) {
    if (ch >= '0' && ch <= '9') id = (id * 10 + (ch - '0')) % 1000000007L;
  }
  return 15000 + static_cast<int>(id % 20000);
}

void apply_slurm_environment(const EnvLookup& env, bool port_given, LaunchConfig& c) {
  const auto need = [&](std::initializer_list<const char*> names) {
    for (const char* n : names) {
      if (auto v = env(n)) return *v;
    }
    throw UsageError(std::string("running under Slurm (SLURM_JOB_ID is set) but ") + *names.begin() +
                     " is not; start ddplaunch with srun, or pass --nnodes/--node_rank/--master_addr");
  };
  const std::string nnodes = need({"SLURM_NNODES", "SLURM_JOB_NUM_NODES"});
  const std::string nodeid = need({"SLURM_NODEID"});
  const std::string nodelist = need({"SLURM_JOB_NODELIST", "SLURM_NODELIST"});
  if (!std::regex_match(nnodes, std::regex("[0-9]{1,6}")) || !std::regex_match(nodeid, std::regex("[0-9]{1,6}"))) {
    throw UsageError("SLURM_NNODES=" + nnodes + " / SLURM_NODEID=" + nodeid + " are not numbers");
  }
  c.min_nodes = c.max_nodes = std::stoi(nnodes);
  c.node_rank = std::stoi(nodeid);
  const auto hosts = expand_hostlist(nodelist);
  if (hosts.empty()) throw UsageError("SLURM_JOB_NODELIST='" + nodelist + "' names no host");
  c.master_addr = hosts.front();
  if (!port_given) c.master_port = slurm_port(env);
  if (c.run_id == "none") {
    if (auto job = env("SLURM_JOB_ID")) c.run_id = "slurm-" + *job;
  }
}

}  // namespace ddp::launcher
