// See node_setup.hpp.
#include "launcher/agent/node_setup.hpp"

#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "common/host_name.hpp"
#include "common/log.hpp"
#include "ddplaunch/rendezvous/endpoint.hpp"
#include "ddplaunch/rendezvous/error.hpp"
#include "launcher/config/failure_budget.hpp"
#include "launcher/topology/numa_plan.hpp"
#include "launcher/workers/worker_spec.hpp"

namespace ddp::launcher {
namespace {

// Resolves a host name or address once up front, so a typo fails in milliseconds with exit 2
// instead of after the rendezvous timeout.
void check_resolvable(const std::string& host, const char* flag) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const std::string bare = rendezvous::unbracket_host(host);
  const int rc = bare.empty() ? EAI_NONAME : ::getaddrinfo(bare.c_str(), nullptr, &hints, &result);
  if (rc != 0) {
    throw UsageError(std::string(flag) + "=" + host + " cannot be resolved (" + gai_strerror(rc) +
                     "); use an IP address or a host name this machine resolves (IPv6 in brackets: [::1])");
  }
  ::freeaddrinfo(result);
}

bool any_streams(const StreamSelection& sel) {
  return sel.all != 0 ||
         std::any_of(sel.per_rank.begin(), sel.per_rank.end(), [](const auto& kv) { return kv.second != 0; });
}

// Makes the run's directory (planned_run_dir()).
std::string log_root_for(const LaunchConfig& c, bool& temporary) {
  const PlannedRunDir plan = planned_run_dir(c);
  temporary = plan.temporary;
  const std::string base = plan.base;
  std::error_code ec;
  std::filesystem::create_directories(base, ec);
  std::string tmpl = plan.name_template;
  if (ec || ::mkdtemp(tmpl.data()) == nullptr) {
    const int err = ec ? ec.value() : errno;
    throw UsageError(
        fmt::format("cannot create a log directory under {}: {}; pass a writable --log_dir", base, std::strerror(err)));
  }
  if (!temporary) log::info("logs: {}", tmpl);
  return tmpl;
}

}  // namespace

std::string node_host_name() {
  const std::string name = host_name();
  return name.empty() ? "localhost" : name;
}

PlannedRunDir planned_run_dir(const LaunchConfig& c) {
  PlannedRunDir plan;
  plan.temporary = c.log_dir.empty() && !any_streams(c.redirects) && !any_streams(c.tee);
  plan.base = c.log_dir.empty() ? c.temp_dir : c.log_dir;
  plan.name_template = plan.base + "/" + c.run_id + "_XXXXXX";
  return plan;
}

void settle_node(const LaunchConfig& c, EffectiveConfig& eff) {
  eff.host = node_host_name();
  eff.port = c.master_port;
  eff.env = current_environment();
  // --failure_budget: the workers' NCCL heartbeat too, unless their environment sets it.
  if (c.failure_budget.count() > 0)
    eff.env.try_emplace(kNcclHeartbeatVar, std::to_string(settings_for_budget(c.failure_budget).nccl_heartbeat_s));
  eff.python = choose_python(eff.env, own_executable());
  eff.cpu_bindings = plan_numa_binding(c.numa_binding, c.nproc_per_node, eff.env);
}

std::unique_ptr<RendezvousBackend> set_up_node(const LaunchConfig& c, const NodeSetupOptions& o,
                                               const BackendFactory& backend, EffectiveConfig& eff) {
  settle_node(c, eff);
  if (o.preflight) {
    check_program(c, eff.python);
    check_resolvable(c.master_addr, "--master_addr");
    if (!c.local_addr.empty()) check_resolvable(c.local_addr, "--local_addr");
  }
  std::unique_ptr<RendezvousBackend> made = backend(c, eff, o.host_store);
  // Last: nothing after it can fail and leave the directory behind.
  eff.log_root = log_root_for(c, eff.temporary_log_root);
  return made;
}

}  // namespace ddp::launcher
