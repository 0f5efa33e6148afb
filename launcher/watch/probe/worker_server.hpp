// A client for PyTorch's per-process worker server (torch._C._distributed_c10d._WorkerServer):
// an HTTP/1.1 server on a unix socket whose handlers answer from inside the worker, without
// ptrace: `fr_trace_json` (the Flight Recorder, watch/fr/recorder.hpp), `dump_traceback` (every
// Python thread's stack, faulthandler's text). One request per connection.
#pragma once

#include <chrono>
#include <string>

namespace ddp::launcher {

struct WorkerServerReply {
  bool ok = false;    // an HTTP 200 answer was read in full
  int status = 0;     // the HTTP status (0: none was read)
  std::string body;   // the answer's body (for a status other than 200 too: torch's error text)
  std::string error;  // when !ok, why: "cannot connect to /run/w0.sock: connection refused",
                      // "no answer from /run/w0.sock to fr_trace_json within 2000 ms", "status 404: ..."
};

// POST /handler/<handler> on the server listening at `socket_path`, and its answer (a body up to
// 64 MiB). A path longer than a sockaddr_un holds (108 bytes) is reached through its directory
// (opened O_PATH, connected as /proc/self/fd/<n>/<name>); only the name itself must fit.
// Blocks up to `timeout` for the whole exchange (connect, write, read), then gives up with
// ok=false. Never throws (but std::bad_alloc). Thread-safe: each call has its own io_context.
WorkerServerReply ask_worker_server(const std::string& socket_path, const std::string& handler,
                                    std::chrono::milliseconds timeout);

// The same exchange with GET (or POST when `post`) of `target` ("/status"), for any HTTP server
// on a unix socket (the launcher's status endpoint, status/); `what` names the request in errors
// ("no answer from <socket> to <what> within 2000 ms"). Blocks, never throws, thread-safe, as
// ask_worker_server.
WorkerServerReply ask_unix_http(const std::string& socket_path, bool post, const std::string& target,
                                const std::string& what, std::chrono::milliseconds timeout);

}  // namespace ddp::launcher
