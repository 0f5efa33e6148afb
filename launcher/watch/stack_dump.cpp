// See stack_dump.hpp.
#include "launcher/watch/stack_dump.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "common/child_process.hpp"
#include "common/find_executable.hpp"
#include "ddplaunch/common/env_lookup.hpp"
#include "launcher/watch/probe/proc_stat.hpp"
#include "launcher/watch/probe/ptrace_access.hpp"
#include "launcher/watch/probe/worker_server.hpp"
#include "launcher/watch/stack_notes.hpp"

namespace ddp::launcher {
namespace {

namespace fs = std::filesystem;

std::string find_tool(const std::string& name, const std::string& beside) {
  std::error_code ec;
  if (!beside.empty()) {
    const fs::path near = fs::path(beside).parent_path() / name;
    if (fs::exists(near, ec)) return near.string();
  }
  return find_on_path(name);
}

bool is_python(int pid) {
  std::error_code ec;
  const std::string exe = fs::read_symlink(fmt::format("/proc/{}/exe", pid), ec).filename().string();
  return exe.rfind("python", 0) == 0;
}

// A tool's output that says ptrace was refused and holds no frame: gdb's "ptrace: Operation not
// permitted.", eu-stack's "dwfl_linux_proc_report pid N: Permission denied", py-spy's
// "Permission Denied: Try running again with elevated permissions".
bool refused_ptrace(const std::string& out) {
  const bool refused = out.find("Operation not permitted") != std::string::npos ||
                       out.find("Permission denied") != std::string::npos ||
                       out.find("Permission Denied") != std::string::npos;
  const bool frames = out.find("#0 ") != std::string::npos || out.find("Thread ") != std::string::npos;
  return refused && !frames;
}

// Runs argv[0] with stdout and stderr into one pipe; returns what it printed, or "" with `why`.
std::string run_tool(const std::vector<std::string>& argv, std::chrono::milliseconds timeout, std::string& why) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    why = "pipe2 failed";
    return "";
  }
  ChildOptions o;
  o.exe = argv.front();
  o.argv = argv;
  o.env = current_environment();
  o.stdout_fd = out[1];
  o.stderr_fd = out[1];
  pid_t pid = -1;
  try {
    pid = start_child(o);
  } catch (const Error& e) {
    why = e.what();
  }
  ::close(out[1]);
  std::string text;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (pid > 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{out[0], POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) == 0) {
      why = fmt::format("{} took longer than {} ms", argv.front(), timeout.count());
      ::kill(pid, SIGKILL);
      break;
    }
    char buf[4096];
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(out[0]);
  if (pid > 0) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  return text;
}

// faulthandler's text starts with the thread that answers (the worker server's handler thread,
// with no Python frame): only the worker's own threads are of interest.
std::string without_answering_thread(const std::string& traceback) {
  const std::string head = "Current thread ";
  const std::string empty = "(most recent call first):\n  <no Python frame>\n";
  if (traceback.compare(0, head.size(), head) != 0) return traceback;
  const std::size_t at = traceback.find(empty);
  if (at == std::string::npos || traceback.find('\n') != at + empty.find('\n')) return traceback;
  std::size_t rest = at + empty.size();
  while (rest < traceback.size() && traceback[rest] == '\n') ++rest;
  return traceback.substr(rest);
}

}  // namespace

std::string server_stack(const std::string& traceback) {
  return "(Python stack from the worker's own server)\n" + without_answering_thread(traceback);
}

StackReading read_stack(int pid, const StackDumpOptions& options) {
  StackReading r;
  const char state = read_proc_stat(pid).state;
  if (state == 0 || state == 'Z') {
    r.text = "(it exited before its stack could be taken)";
    return r;
  }
  if (const auto it = options.sockets.find(pid); it != options.sockets.end()) {
    const WorkerServerReply reply = ask_worker_server(it->second, "dump_traceback", options.timeout);
    if (reply.ok && !reply.body.empty()) {
      r.read = r.python = r.python_frames = true;
      r.text = server_stack(reply.body);
      return r;
    }
    r.server_error = reply.ok ? "its worker server answered nothing" : reply.error;
  }
  std::vector<std::string> argv;
  std::string source;
  r.python = is_python(pid);
  if (r.python) {
    if (const std::string spy = find_tool("py-spy", options.python); !spy.empty()) {
      r.spy_found = true;
      argv = {spy, "dump", "--pid", std::to_string(pid)};
      source = "(py-spy)";
      // A stopped process cannot be suspended again: read it as it is.
      if (state == 'T' || state == 't') argv.push_back("--nonblocking");
    }
  }
  if (argv.empty()) {
    if (const std::string eu = find_tool("eu-stack", ""); !eu.empty()) {
      argv = {eu, "-p", std::to_string(pid)};
      source = "(eu-stack: native frames)";
    } else if (const std::string gdb = find_tool("gdb", ""); !gdb.empty()) {
      argv = {gdb, "-p", std::to_string(pid), "-batch", "-nx", "-ex", "thread apply all bt"};
      source = "(gdb: native frames)";
    }
  }
  // Why the worker's own server gave none, said with whatever comes instead.
  const std::string server_note = r.server_error.empty() ? "" : " (its worker server: " + r.server_error + ")";
  if (argv.empty()) {
    r.text = "no stack" + server_note +
             ": py-spy (for Python), eu-stack and gdb not found; install py-spy into the venv or Debian's "
             "elfutils";
    return r;
  }
  std::string why;
  std::string text = run_tool(argv, options.timeout, why);
  const std::string tool = fs::path(argv.front()).filename().string();
  if (refused_ptrace(text)) {
    r.denied_tool = tool;
    r.denial = explain_ptrace_denial(read_ptrace_facts(pid));
    r.text = fmt::format("no stack: {} may not ptrace it (see the note below){}", tool, server_note);
    return r;
  }
  if (text.empty()) {
    r.text = fmt::format("no stack from {}: {}{}", argv.front(), why.empty() ? "it printed nothing" : why, server_note);
    return r;
  }
  if (!why.empty()) text += "\n(" + why + ")";
  r.read = true;
  r.python_frames = tool == "py-spy";
  r.text = source + server_note + "\n" + text;
  return r;
}

std::string dump_stack(int pid, const StackDumpOptions& options) {
  return read_stack(pid, options).text;
}

StacksDump dump_stacks(const std::map<int, int>& ranks_by_pid, const StackDumpOptions& options) {
  std::map<int, std::pair<int, StackReading>> by_rank;  // rank → (pid, stack)
  for (const auto& [pid, rank] : ranks_by_pid) by_rank[rank] = {pid, {}};
  std::vector<std::thread> threads;
  for (auto& [rank, entry] : by_rank) {
    try {
      threads.emplace_back([&entry = entry, &options] { entry.second = read_stack(entry.first, options); });
    } catch (const std::system_error& e) {
      entry.second.text = std::string("no stack: ") + e.what();
    }
  }
  for (std::thread& t : threads) t.join();
  StacksDump dump;
  std::map<int, StackReading> readings;
  for (auto& [rank, entry] : by_rank) {
    dump.text += fmt::format("rank {} (pid {}):\n{}\n\n", rank, entry.first, entry.second.text);
    ++dump.ranks;
    dump.read += entry.second.read ? 1 : 0;
    readings[rank] = std::move(entry.second);
  }
  dump.text += stack_notes(readings, options);
  return dump;
}

}  // namespace ddp::launcher
