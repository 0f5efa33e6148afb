// The Python worker hook: a sitecustomize.py (python/ddplaunch/worker_hook/, embedded at build
// time) that the launcher puts first on each Python worker's PYTHONPATH. When a worker first
// imports torch it starts torch's worker server on the unix socket named in
// DDPLAUNCH_WORKER_SOCKET (which it removes from its environment), so the launcher can ask a
// running worker for its Flight Recorder and Python stacks.
//
// Contract with each Python worker's environment (the caller builds it, per worker):
//   PYTHONPATH=<install_python_hook(run_dir)>[:<the user's PYTHONPATH>]
//   DDPLAUNCH_WORKER_SOCKET=<absolute path that does not exist yet; any length>
// and what the worker leaves behind:
//   <socket>              the server, once the worker has imported torch; removed at a normal
//                         exit, left behind by os._exit or a signal
//   <socket>.unavailable  one line saying why there is no server (a torch without
//                         _WorkerServer, a path it could not bind); neither file: the worker has
//                         not imported torch (yet), or ran with -I, -E or -S (no hook then)
//   <run_dir>/python/__pycache__/  the hook's .pyc, written by the first worker (by the hook
//                         itself under PYTHONDONTWRITEBYTECODE, once a worker imports torch)
// Asking the server: POST /handler/<name> (ping, dump_traceback, fr_trace_json), one request per
// connection ("Connection: close") with a timeout. torch's shutdown() keeps the GIL while it
// joins the handlers, and dump_traceback's handler needs the GIL: the hook unlinks the socket and
// drains with a ping before shutting down at exit, but a request already accepted in that last
// moment can still hang the worker's exit, so a worker that does not exit after its grace is
// killed as any other.
#pragma once

#include <string>
#include <string_view>

namespace ddp::launcher {

// The hook's bytes, exactly as in python/ddplaunch/worker_hook/sitecustomize.py at build time.
// Never blocks or throws; thread-safe.
std::string_view python_hook_source();

// Writes the hook as <run_dir>/python/sitecustomize.py (mode 0600, the directory 0700, created if
// missing; an existing file is rewritten with the same bytes) and returns <run_dir>/python, the
// directory to put first on PYTHONPATH. Call it once per run, before the first Python worker
// starts. Blocks on local file I/O only; throws ddp::Error naming the path, the error and a fix
// when the directory or the file cannot be written. Not thread-safe for one run_dir.
std::string install_python_hook(const std::string& run_dir);

// Where install_python_hook puts the hook: <run_dir>/python. Pure.
std::string python_hook_dir(const std::string& run_dir);

}  // namespace ddp::launcher
