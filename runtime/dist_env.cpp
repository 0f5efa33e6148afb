// DistEnv resolution: the three init paths of dist_env.hpp, each collecting every missing or bad
// variable before throwing, so one message lists all of them.
#include "ddplaunch/dist_env.hpp"

#include <charconv>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/hostlist.hpp"
#include "common/mpi_env.hpp"
#include "common/worker_env.hpp"

namespace ddp::runtime {
namespace {

namespace we = ddp::worker_env;

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// Reads variables for one init path, remembering which were missing or malformed.
class Reader {
 public:
  Reader(const EnvLookup& env, const char* path) : env_(env), path_(path) {}

  std::optional<std::string> optional(const std::string& name) { return env_(name); }

  // Records `what` (a variable, or alternatives) as missing.
  void missing(const std::string& what) { missing_.push_back(what); }

  std::string text(const std::string& name) {
    auto v = env_(name);
    if (!v || v->empty()) {
      missing_.push_back(name);
      return {};
    }
    return *v;
  }

  long integer(const std::string& name, long lo, long hi) {
    auto v = env_(name);
    if (!v || v->empty()) {
      missing_.push_back(name);
      return lo;
    }
    return parse(name, *v, lo, hi);
  }

  long parse(const std::string& name, const std::string& value, long lo, long hi) {
    long out = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), out);
    if (ec != std::errc() || end != value.data() + value.size() || out < lo || out > hi) {
      bad_.push_back(name + "='" + value + "' (expected an integer in [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "])");
      return lo;
    }
    return out;
  }

  // Throws when anything was missing or malformed.
  void check() const {
    std::string msg;
    if (!missing_.empty()) msg += "missing " + join(missing_);
    if (!bad_.empty()) msg += std::string(msg.empty() ? "" : "; ") + "bad " + join(bad_);
    if (!msg.empty()) throw EnvError(std::string(path_) + ": " + msg);
  }

  const char* path() const { return path_; }

 private:
  const EnvLookup& env_;
  const char* path_;
  std::vector<std::string> missing_;
  std::vector<std::string> bad_;
};

constexpr long kMaxInt = 1L << 30;

// The --local_rank value in argv, if any (`--local_rank=i`, `--local-rank=i`, `--local_rank i`).
std::optional<std::string> local_rank_arg(const std::vector<std::string>& argv) {
  for (std::size_t i = 1; i < argv.size(); ++i) {
    for (const char* flag : {"--local_rank", "--local-rank"}) {
      const std::string f = flag;
      if (argv[i] == f) {
        if (i + 1 >= argv.size()) throw EnvError(f + " in the arguments has no value");
        return argv[i + 1];
      }
      if (argv[i].rfind(f + "=", 0) == 0) return argv[i].substr(f.size() + 1);
    }
  }
  return std::nullopt;
}

void check_consistent(const DistEnv& e, const char* path, const char* rank_var, const char* world_var,
                      const char* local_var, const char* local_world_var) {
  auto fail = [&](const std::string& what) { throw EnvError(std::string(path) + ": " + what); };
  if (e.rank >= e.world_size)
    fail(std::string(rank_var) + "=" + std::to_string(e.rank) + " is not below " + world_var + "=" +
         std::to_string(e.world_size));
  if (e.local_world_size > 0 && e.local_rank >= e.local_world_size)
    fail(std::string(local_var) + "=" + std::to_string(e.local_rank) + " is not below " + local_world_var + "=" +
         std::to_string(e.local_world_size));
  if (e.local_world_size > e.world_size)
    fail(std::string(local_world_var) + "=" + std::to_string(e.local_world_size) + " exceeds " + world_var + "=" +
         std::to_string(e.world_size));
  if (e.local_rank > e.rank)
    fail(std::string(local_var) + "=" + std::to_string(e.local_rank) + " exceeds " + rank_var + "=" +
         std::to_string(e.rank));
}

DistEnv from_torchrun(const EnvLookup& env, const std::vector<std::string>& argv) {
  Reader r(env, "torchrun environment");
  DistEnv e;
  e.source = EnvSource::Torchrun;
  e.rank = static_cast<int>(r.integer(we::kRank, 0, kMaxInt));
  e.world_size = static_cast<int>(r.integer(we::kWorldSize, 1, kMaxInt));
  e.local_rank = static_cast<int>(r.integer(we::kLocalRank, 0, kMaxInt));
  e.local_world_size = static_cast<int>(r.integer(we::kLocalWorldSize, 1, kMaxInt));
  e.master_addr = r.text(we::kMasterAddr);
  e.master_port = static_cast<std::uint16_t>(r.integer(we::kMasterPort, 1, 65535));
  if (auto arg = local_rank_arg(argv)) {
    const long v = r.parse("--local_rank", *arg, 0, kMaxInt);
    r.check();
    if (v != e.local_rank)
      throw EnvError("torchrun environment: --local_rank=" + *arg +
                     " in the arguments contradicts LOCAL_RANK=" + std::to_string(e.local_rank));
  }
  r.check();
  check_consistent(e, r.path(), we::kRank, we::kWorldSize, we::kLocalRank, we::kLocalWorldSize);
  return e;
}

DistEnv from_legacy(const EnvLookup& env, const std::string& arg) {
  Reader r(env, "legacy --local_rank launch");
  DistEnv e;
  e.source = EnvSource::LegacyLocalRank;
  e.local_rank = static_cast<int>(r.parse("--local_rank", arg, 0, kMaxInt));
  e.rank = static_cast<int>(r.integer(we::kRank, 0, kMaxInt));
  e.world_size = static_cast<int>(r.integer(we::kWorldSize, 1, kMaxInt));
  e.master_addr = r.text(we::kMasterAddr);
  e.master_port = static_cast<std::uint16_t>(r.integer(we::kMasterPort, 1, 65535));
  e.local_world_size = 0;
  if (auto lws = r.optional(we::kLocalWorldSize); lws && !lws->empty())
    e.local_world_size = static_cast<int>(r.parse(we::kLocalWorldSize, *lws, 1, kMaxInt));
  r.check();
  check_consistent(e, r.path(), we::kRank, we::kWorldSize, "--local_rank", we::kLocalWorldSize);
  return e;
}

// Tasks on node `node` from SLURM_TASKS_PER_NODE's run-length form "2(x3),1".
std::optional<long> tasks_on_node(Reader& r, const std::string& spec, long node) {
  long seen = 0;
  std::size_t pos = 0;
  while (pos < spec.size()) {
    std::size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    const std::string item = spec.substr(pos, comma - pos);
    const std::size_t paren = item.find("(x");
    const long count = r.parse("SLURM_TASKS_PER_NODE", item.substr(0, paren), 0, kMaxInt);
    long repeat = 1;
    if (paren != std::string::npos) {
      if (item.back() != ')') {
        r.parse("SLURM_TASKS_PER_NODE", spec, 0, 0);  // records it as malformed
        return std::nullopt;
      }
      repeat = r.parse("SLURM_TASKS_PER_NODE", item.substr(paren + 2, item.size() - paren - 3), 1, kMaxInt);
    }
    if (node < seen + repeat) return count;
    seen += repeat;
    pos = comma + 1;
  }
  return std::nullopt;
}

DistEnv from_slurm(const EnvLookup& env) {
  Reader r(env, "slurm task environment");
  DistEnv e;
  e.source = EnvSource::Slurm;
  e.rank = static_cast<int>(r.integer("SLURM_PROCID", 0, kMaxInt));
  e.world_size = static_cast<int>(r.integer("SLURM_NTASKS", 1, kMaxInt));
  e.local_rank = static_cast<int>(r.integer("SLURM_LOCALID", 0, kMaxInt));

  e.local_world_size = 0;
  if (auto v = r.optional("SLURM_NTASKS_PER_NODE"); v && !v->empty()) {
    e.local_world_size = static_cast<int>(r.parse("SLURM_NTASKS_PER_NODE", *v, 1, kMaxInt));
  } else if (auto spec = r.optional("SLURM_TASKS_PER_NODE"); spec && !spec->empty()) {
    const long node = r.integer("SLURM_NODEID", 0, kMaxInt);
    if (auto n = tasks_on_node(r, *spec, node)) e.local_world_size = static_cast<int>(*n);
  } else if (auto nodes = r.optional("SLURM_JOB_NUM_NODES"); nodes && !nodes->empty()) {
    const long n = r.parse("SLURM_JOB_NUM_NODES", *nodes, 1, kMaxInt);
    if (e.world_size % n == 0) e.local_world_size = static_cast<int>(e.world_size / n);
  }

  if (auto addr = r.optional(we::kMasterAddr); addr && !addr->empty()) {
    e.master_addr = *addr;
  } else {
    auto list = r.optional("SLURM_JOB_NODELIST");
    if (!list || list->empty()) list = r.optional("SLURM_NODELIST");
    if (!list || list->empty()) {
      r.missing("SLURM_JOB_NODELIST (or MASTER_ADDR)");
    } else {
      std::vector<std::string> hosts;
      try {
        hosts = expand_hostlist(*list);
      } catch (const UsageError& bad) {
        throw EnvError(std::string("slurm task environment: ") + bad.what());
      }
      if (hosts.empty()) throw EnvError("slurm task environment: SLURM_JOB_NODELIST='" + *list + "' names no host");
      e.master_addr = hosts.front();
    }
  }
  // The launcher's rule (common/hostlist.hpp), so srun tasks and ddplaunch agree on the port.
  if (auto port = r.optional(we::kMasterPort); port && !port->empty()) {
    e.master_port = static_cast<std::uint16_t>(r.parse(we::kMasterPort, *port, 1, 65535));
  } else if (auto job = r.optional("SLURM_JOB_ID"); !job || job->empty()) {
    r.missing("SLURM_JOB_ID (or MASTER_PORT)");
  } else {
    try {
      e.master_port = static_cast<std::uint16_t>(slurm_master_port(env));
    } catch (const UsageError&) {
      r.parse("SLURM_JOB_ID", *job, 0, 0);  // records it as malformed, with the others
    }
  }
  r.check();
  if (e.local_world_size == 0)
    throw EnvError(
        "slurm task environment: cannot tell the tasks per node; set SLURM_NTASKS_PER_NODE "
        "(srun --ntasks-per-node) or SLURM_TASKS_PER_NODE with SLURM_NODEID");
  check_consistent(e, r.path(), "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "the tasks per node");
  return e;
}

DistEnv from_mpi(const EnvLookup& env) {
  try {
    const MpiProcess p = *mpi_process(env);
    DistEnv e;
    e.source = EnvSource::Mpi;
    e.rank = p.rank;
    e.world_size = p.size;
    e.local_rank = p.local_rank;
    e.local_world_size = p.local_size;
    e.master_addr = p.master_addr.value_or("127.0.0.1");
    e.master_port = static_cast<std::uint16_t>(mpi_master_port(env, p));
    e.host_store = p.rank == 0;
    return e;
  } catch (const UsageError& bad) {
    throw EnvError(std::string("mpi environment: ") + bad.what());
  }
}

}  // namespace

const char* to_string(EnvSource source) {
  switch (source) {
    case EnvSource::Torchrun:
      return "torchrun";
    case EnvSource::LegacyLocalRank:
      return "legacy --local_rank";
    case EnvSource::Slurm:
      return "slurm";
    case EnvSource::Mpi:
      return "mpi";
  }
  return "unknown";
}

bool has_launch_env(const EnvLookup& env, const std::vector<std::string>& argv) {
  const auto set = [&](const char* name) {
    const auto v = env(name);
    return v && !v->empty();
  };
  return set(we::kLocalRank) || set("SLURM_PROCID") || under_mpi(env) || local_rank_arg(argv).has_value();
}

DistEnv resolve_dist_env(const EnvLookup& env, const std::vector<std::string>& argv) {
  if (auto v = env(we::kLocalRank); v && !v->empty()) return from_torchrun(env, argv);
  if (auto arg = local_rank_arg(argv)) return from_legacy(env, *arg);
  if (auto v = env("SLURM_PROCID"); v && !v->empty()) return from_slurm(env);
  if (under_mpi(env)) return from_mpi(env);
  throw EnvError(
      "no distributed launch environment: expected LOCAL_RANK, RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, "
      "MASTER_ADDR, MASTER_PORT (start under ddplaunch or torchrun), a --local_rank argument with "
      "MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, SLURM_PROCID (start under srun), or "
      "OMPI_COMM_WORLD_RANK / PMI_RANK (start under mpirun)");
}

DistEnv dist_env_from_process(int argc, const char* const* argv) {
  return resolve_dist_env(process_env(), std::vector<std::string>(argv, argv + argc));
}

}  // namespace ddp::runtime
