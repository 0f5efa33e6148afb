// See ptrace_access.hpp.
#include "launcher/watch/probe/ptrace_access.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace ddp::launcher {
namespace {

constexpr int kCapSysPtrace = 19;  // capability(7)

// The first number after `field` in /proc/<who>/status ("Uid:" gives the real uid, then the
// effective one: `index` picks it); -1 when absent.
long long status_field(const std::string& who, const std::string& field, int index, int base) {
  std::ifstream in("/proc/" + who + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(field, 0) != 0) continue;
    std::istringstream values(line.substr(field.size()));
    std::string v;
    for (int i = 0; i <= index && values >> v; ++i) {
    }
    try {
      return std::stoll(v, nullptr, base);
    } catch (const std::exception&) {
      return -1;  // a malformed line reads as absent
    }
  }
  return -1;
}

}  // namespace

PtraceFacts read_ptrace_facts(int pid) {
  PtraceFacts f;
  if (std::ifstream scope("/proc/sys/kernel/yama/ptrace_scope"); !(scope >> f.yama_scope)) f.yama_scope = -1;
  const long long caps = status_field("self", "CapEff:", 0, 16);
  f.cap_sys_ptrace = caps >= 0 && (caps >> kCapSysPtrace & 1) != 0;
  f.self_uid = static_cast<long>(::geteuid());
  f.target_uid = static_cast<long>(status_field(std::to_string(pid), "Uid:", 1, 10));
  struct stat st {};
  // A process that is not dumpable has the files of its /proc directory owned by root (proc(5)).
  if (f.target_uid > 0 && ::stat(fmt::format("/proc/{}/status", pid).c_str(), &st) == 0)
    f.target_dumpable = static_cast<long>(st.st_uid) == f.target_uid;
  return f;
}

PtraceDenial explain_ptrace_denial(const PtraceFacts& f) {
  const std::string no_ptrace_fix = "run it with --cap-add SYS_PTRACE in a container, or as root";
  if (f.yama_scope == 3)
    return {"kernel.yama.ptrace_scope is 3 (ptrace is off until reboot)",
            "set kernel.yama.ptrace_scope=0 at boot, or let Python workers answer themselves (without "
            "--no_worker_server)"};
  if (f.yama_scope == 2 && !f.cap_sys_ptrace)
    return {"kernel.yama.ptrace_scope is 2 (only with CAP_SYS_PTRACE) and the launcher lacks CAP_SYS_PTRACE",
            no_ptrace_fix + ", or sysctl kernel.yama.ptrace_scope=0"};
  if (!f.target_dumpable && !f.cap_sys_ptrace)
    return {"the worker is not dumpable (it called prctl(PR_SET_DUMPABLE, 0) or changed its user)",
            "let Python workers answer themselves (without --no_worker_server), or run ddplaunch as root"};
  if (f.target_uid >= 0 && f.target_uid != f.self_uid && !f.cap_sys_ptrace)
    return {fmt::format("the worker runs as uid {} and the launcher as uid {} without CAP_SYS_PTRACE", f.target_uid,
                        f.self_uid),
            "run ddplaunch as the workers' user"};
  if (f.yama_scope == 1 && !f.cap_sys_ptrace)
    return {
        "kernel.yama.ptrace_scope is 1 (only a process's ancestors may ptrace it, and the stack tool is the "
        "worker's sibling) and the launcher lacks CAP_SYS_PTRACE",
        "sysctl kernel.yama.ptrace_scope=0, or " + no_ptrace_fix};
  if (!f.cap_sys_ptrace) return {"the launcher lacks CAP_SYS_PTRACE (containers drop it by default)", no_ptrace_fix};
  return {"a security profile (seccomp, AppArmor, SELinux) forbids ptrace",
          "allow ptrace in the container's profile (docker: --security-opt seccomp=unconfined)"};
}

}  // namespace ddp::launcher
