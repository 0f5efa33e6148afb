// See mpi_env.hpp.
#include "common/mpi_env.hpp"

#include <charconv>
#include <climits>

#include <fmt/format.h>

#include "common/hostlist.hpp"
#include "common/worker_env.hpp"
#include "ddplaunch/common/error.hpp"

namespace ddp {
namespace {

int number(const EnvLookup& env, const char* name, int min) {
  const auto v = env(name);
  if (!v)
    throw UsageError(fmt::format("started by MPI but {} is not set; start ddplaunch with mpirun or mpiexec", name));
  int n = 0;
  const auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
  if (ec != std::errc() || end != v->data() + v->size() || n < min)
    throw UsageError(fmt::format("{}={} is not a whole number >= {}; it should come from mpirun", name, *v, min));
  return n;
}

int number_or(const EnvLookup& env, const char* name, int min, int fallback) {
  return env(name) ? number(env, name, min) : fallback;
}

// The first IPv4 address in an OpenMPI 4 HNP URI: "<jobid>.<vpid>;tcp://a,b:port;tcp6://[..]:port".
std::optional<std::string> hnp_address(const std::string& uri) {
  const std::string tag = "tcp://";
  const auto start = uri.find(tag);
  if (start == std::string::npos) return std::nullopt;
  const auto from = start + tag.size();
  const auto stop = uri.find_first_of(",:;", from);
  std::string addr = uri.substr(from, stop == std::string::npos ? std::string::npos : stop - from);
  if (addr.empty()) return std::nullopt;
  return addr;
}

}  // namespace

bool under_mpi(const EnvLookup& env) {
  return env("OMPI_COMM_WORLD_RANK") || env("PMIX_RANK") || env("PMI_RANK");
}

std::optional<MpiProcess> mpi_process(const EnvLookup& env) {
  MpiProcess p;
  if (env("OMPI_COMM_WORLD_RANK")) {
    p.flavour = "OpenMPI";
    p.rank = number(env, "OMPI_COMM_WORLD_RANK", 0);
    p.size = number(env, "OMPI_COMM_WORLD_SIZE", 1);
    p.local_rank = number_or(env, "OMPI_COMM_WORLD_LOCAL_RANK", 0, 0);
    p.local_size = number_or(env, "OMPI_COMM_WORLD_LOCAL_SIZE", 1, 1);
    p.job_id = env("OMPI_MCA_ess_base_jobid").value_or(env("PMIX_NAMESPACE").value_or(""));
  } else if (env("PMIX_RANK")) {
    p.flavour = "PMIx";
    p.rank = number(env, "PMIX_RANK", 0);
    p.size = number(env, "OMPI_COMM_WORLD_SIZE", 1);  // PMIx itself gives the size only through its API
    p.local_rank = number_or(env, "OMPI_COMM_WORLD_LOCAL_RANK", 0, 0);
    p.local_size = number_or(env, "OMPI_COMM_WORLD_LOCAL_SIZE", 1, 1);
    p.job_id = env("PMIX_NAMESPACE").value_or("");
  } else if (env("PMI_RANK")) {
    p.flavour = "MPICH";
    p.rank = number(env, "PMI_RANK", 0);
    p.size = number(env, "PMI_SIZE", 1);
    p.local_rank = number_or(env, "MPI_LOCALRANKID", 0, 0);
    p.local_size = number_or(env, "MPI_LOCALNRANKS", 1, 1);
  } else {
    return std::nullopt;
  }
  if (p.rank >= p.size || p.local_rank >= p.local_size || p.local_size > p.size)
    throw UsageError(
        fmt::format("{} gave rank {} of {}, local rank {} of {}, which contradict each other; "
                    "start the job with mpirun or mpiexec",
                    p.flavour, p.rank, p.size, p.local_rank, p.local_size));
  if (auto addr = env(worker_env::kMasterAddr); addr && !addr->empty()) {
    p.master_addr = *addr;
  } else if (auto uri = env("OMPI_MCA_orte_hnp_uri")) {
    p.master_addr = hnp_address(*uri);
  }
  return p;
}

int mpi_master_port(const EnvLookup& env, const MpiProcess& p) {
  if (auto port = master_port_override(env)) return *port;
  if (p.job_id.empty()) return 29500;
  // Digits: the exact value mod 20000; anything else (a PMIx namespace): FNV-1a, then mod 20000.
  bool digits = true;
  for (char ch : p.job_id) digits = digits && ch >= '0' && ch <= '9';
  unsigned long long rest = 0;
  if (digits) {
    for (char ch : p.job_id) rest = (rest * 10 + static_cast<unsigned>(ch - '0')) % 20000;
  } else {
    unsigned long long h = 1469598103934665603ull;
    for (unsigned char ch : p.job_id) h = (h ^ ch) * 1099511628211ull;
    rest = h % 20000;
  }
  return 15000 + static_cast<int>(rest);
}

std::string mpi_run_id(const MpiProcess& p) {
  if (p.job_id.empty()) return "none";
  std::string id = "mpi-" + p.job_id;
  for (char& ch : id) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
                    ch == '.' || ch == '-';
    if (!ok) ch = '_';
  }
  return id;
}

}  // namespace ddp
