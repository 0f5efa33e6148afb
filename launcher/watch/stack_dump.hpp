// A running process's stack: first from the worker itself when it runs torch's worker server
// (watch/probe/worker_server.hpp: its `dump_traceback`, every Python thread, no ptrace needed),
// else taken from outside with the tool made for it: `py-spy dump` for a Python process (the
// py-spy next to the workers' interpreter, i.e. in the venv, else on PATH), `eu-stack` (Debian
// elfutils) or gdb for a native one. The process is paused only while a tool reads it, and is
// never stopped or killed by this. The text's first line says where it came from.
#pragma once

#include <chrono>
#include <map>
#include <string>

namespace ddp::launcher {

struct StackDumpOptions {
  std::string python;  // the workers' interpreter ("" if none): py-spy is looked for next to it
  std::chrono::milliseconds timeout{std::chrono::seconds(10)};  // the tool is killed after this
  std::map<int, std::string> sockets;  // pid → its worker server's socket, asked first (with the timeout)
};

// The stack text after a line naming its source ("(Python stack from the worker's own server)",
// "(py-spy)", "(eu-stack: native frames)", "(gdb: native frames)"), or one line saying why there
// is none ("no stack: py-spy and eu-stack not
// found; install py-spy into the venv or Debian's elfutils"). Blocks for the tool's run (up to
// the timeout). Never throws. Thread-safe.
std::string dump_stack(int pid, const StackDumpOptions& options);

// A worker server's dump_traceback answer as a stack of dump_stack()'s: its source named, the
// answering thread (the server's, with no Python frame) left out. Pure.
std::string server_stack(const std::string& traceback);

// Every worker's stack at once (one thread each): "rank R (pid P):\n<stack>\n\n" in rank order.
// Blocks up to about the timeout. Never throws (a thread that cannot start gives its one line).
std::string dump_stacks(const std::map<int, int>& ranks_by_pid, const StackDumpOptions& options);

}  // namespace ddp::launcher
