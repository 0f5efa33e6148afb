// The launcher's live status endpoint: a small HTTP/1.1 server on a thread of its own, so it
// never holds the agent's event loop, listening on a unix socket in the run's directory (always;
// the directory is 0700, so only this user reaches it) and, with --status_port, on TCP. With a
// `start_on_dial` loop the thread starts when the first connection arrives (common/dial_watch.hpp):
// a short job that nobody asks about never starts it.
//   GET /         200, the job's page (page/job_page.html, built into the binary: docs/job-page.md)
//   GET /status   200, the board's JSON (status_json.hpp)
//   GET /stack?rank=R  200, rank R's stack as text, taken on request (`stack` below; unset: 404)
//   GET /healthz  200 "ok" when the agent's event loop ran a probe within 1 s; else 503 saying so
//   anything else 404 (a method other than GET: 405)
// With a token, a TCP request for anything but /healthz without it is answered 401 and nothing
// else happens (status_access.hpp); the unix socket needs none.
// One request per connection (the answer closes it). A stranger cannot hold it: a request's
// header is at most 8 KiB, has no body and must arrive whole within 2 s (a silent or slow client
// is closed then); the answer has 5 s more. At most 32 are open at once: a new connection at the
// cap closes the oldest one still reading its request from the address that holds the most such
// connections (so a probe, which sends its request at once, is answered however many silent or
// slow connections a stranger holds and reopens); only when every open connection is being
// answered is the new one closed.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <boost/asio/io_context.hpp>

#include "common/dial_watch.hpp"

namespace ddp::launcher {

struct StatusServerOptions {
  std::string socket_path;      // the unix socket to make ("": none); any length (watch/probe/socket_path.hpp)
  std::optional<int> tcp_port;  // nullopt: no TCP; 0: a free port
  std::string tcp_host;         // the TCP address: "" for every interface (IPv6 and IPv4)
  std::chrono::milliseconds header_timeout{std::chrono::seconds(2)};   // to receive the request
  std::chrono::milliseconds request_timeout{std::chrono::seconds(5)};  // then to answer it
  std::chrono::milliseconds health_timeout{std::chrono::seconds(1)};
  int max_connections = 32;
  std::string token;  // what TCP requests must carry (status_access.hpp); "": none
  // Takes rank R's stack and calls `done` (from any thread, once) with an HTTP status and the
  // text. Called on the server thread; must not block. Unset: /stack answers 404.
  using StackDone = std::function<void(int http_status, std::string text)>;
  std::function<void(int rank, StackDone done)> stack;
  std::chrono::milliseconds stack_timeout{std::chrono::seconds(40)};  // to answer /stack
  // Runs a probe on the agent's loop (thread-safe, never blocks: an Asio post). Unset: /healthz
  // answers from the server thread alone.
  std::function<void(std::function<void()>)> post_to_agent;
  // The loop that watches for the first connection, which starts the server's thread (null: it
  // starts at once). The server must then be destroyed on that loop's thread (or while it does
  // not run), before the loop.
  boost::asio::io_context* start_on_dial = nullptr;
};

struct StatusServerState;  // status_server.cpp

class StatusServer {
 public:
  // Binds (the unix socket replaces nothing: its path must be free) and starts serving (its
  // thread: now, or at the first connection with options.start_on_dial).
  // `status` is called on the server thread for each GET /status and must be thread-safe.
  // Throws UsageError naming the address and a fix when the TCP port cannot be bound (taken,
  // not an address of this machine), ddp::Error when the unix socket cannot be made.
  StatusServer(StatusServerOptions options, std::function<std::string()> status);
  // Stops serving (open connections are closed), joins the thread, removes the socket file.
  ~StatusServer();
  StatusServer(const StatusServer&) = delete;
  StatusServer& operator=(const StatusServer&) = delete;

  // The TCP port bound (the real one for port 0); 0 without TCP.
  int tcp_port() const { return tcp_port_; }

 private:
  void start_thread();

  std::shared_ptr<StatusServerState> impl_;  // probes posted to the agent's loop hold it weakly
  std::unique_ptr<DialWatch> dial_watch_;    // with start_on_dial, until the first connection
  std::thread thread_;
  int tcp_port_ = 0;
};

}  // namespace ddp::launcher
