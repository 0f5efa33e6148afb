// A running process's stack: first from the worker itself when it runs torch's worker server
// (watch/probe/worker_server.hpp: its `dump_traceback`, every Python thread, no ptrace needed),
// else taken from outside with the tool made for it: `py-spy dump` for a Python process (the
// py-spy next to the workers' interpreter, i.e. in the venv, else on PATH), `eu-stack` (Debian
// elfutils) or gdb for a native one. The process is paused only while a tool reads it, and is
// never stopped or killed by this. The text's first line says where it came from. Under the
// ranks, one note per cause (stack_hints.hpp) says why a stack has no Python lines or could not
// be read at all, and what would give them.
#pragma once

#include <chrono>
#include <map>
#include <string>

#include "launcher/watch/probe/ptrace_access.hpp"

namespace ddp::launcher {

struct StackDumpOptions {
  std::string python;  // the workers' interpreter ("" if none): py-spy is looked for next to it
  std::chrono::milliseconds timeout{std::chrono::seconds(10)};  // the tool is killed after this
  std::map<int, std::string> sockets;  // pid → its worker server's socket, asked first (with the timeout)
  std::string no_server;               // why the workers run no worker server ("--no_worker_server")
};

// What dump_stack found for one process, for the notes under the ranks.
struct StackReading {
  std::string text;            // what dump_stack returns
  bool read = false;           // a stack came from some source
  bool python = false;         // the process runs a Python interpreter
  bool python_frames = false;  // from its worker server or py-spy
  std::string server_error;    // why its worker server gave none; "": not asked, or it answered
  bool spy_found = false;      // py-spy was found (asked only for a Python process)
  std::string denied_tool;     // the tool refused ptrace ("py-spy", "eu-stack", "gdb"); "": not refused
  PtraceDenial denial;         // why, when refused
};

// dump_stacks' answer: the text, and how many of its ranks gave a stack.
struct StacksDump {
  std::string text;
  int ranks = 0;
  int read = 0;
};

// The stack text after a line naming its source ("(Python stack from the worker's own server)",
// "(py-spy)", "(eu-stack: native frames)", "(gdb: native frames)"), or one line saying why there
// is none ("no stack: py-spy and eu-stack not
// found; install py-spy into the venv or Debian's elfutils"). Blocks for the tool's run (up to
// the timeout). Never throws. Thread-safe. A refused ptrace reads as one line ("no stack:
// eu-stack may not ptrace it (see the note below)").
std::string dump_stack(int pid, const StackDumpOptions& options);
// The same, with what the notes need.
StackReading read_stack(int pid, const StackDumpOptions& options);

// A worker server's dump_traceback answer as a stack of dump_stack()'s: its source named, the
// answering thread (the server's, with no Python frame) left out. Pure.
std::string server_stack(const std::string& traceback);

// Every worker's stack at once (one thread each): "rank R (pid P):\n<stack>\n\n" in rank order,
// then stack_notes()' lines. Blocks up to about the timeout. Never throws (a thread that cannot
// start gives its one line).
StacksDump dump_stacks(const std::map<int, int>& ranks_by_pid, const StackDumpOptions& options);

}  // namespace ddp::launcher
