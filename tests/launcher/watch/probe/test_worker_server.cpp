// The worker-server client against a fake server on a unix socket (an answer, an error status, a
// path longer than sun_path, a server that never answers, no server) and, where the venv has
// torch, against torch's own _WorkerServer in a Python process.
#include "launcher/watch/probe/worker_server.hpp"

#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include "launcher/watch/fr/recorder.hpp"
#include "launcher/watch/stack_dump.hpp"

using namespace std::chrono_literals;
using ddp::launcher::ask_worker_server;
using ddp::launcher::WorkerServerReply;
namespace fs = std::filesystem;

namespace {

// A fresh directory under /tmp, removed with everything in it.
struct TempDir {
  TempDir() {
    char name[] = "/tmp/ddp-ws-XXXXXX";
    path = ::mkdtemp(name);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);  // best effort: a leftover under /tmp harms nothing
  }
  std::string path;
};

// Listens at `path` (through its directory, for long paths); for each connection reads the
// request head and answers `reply` verbatim, or nothing at all if `reply` is empty. One thread;
// stops when destroyed.
class FakeServer {
 public:
  FakeServer(const std::string& path, std::string reply) : reply_(std::move(reply)) {
    const fs::path p(path);
    fs::current_path(p.parent_path());  // bind by the short relative name
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::string name = p.filename().string();
    std::copy(name.begin(), name.end(), addr.sun_path);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    fs::current_path("/");
    REQUIRE(::listen(fd_, 4) == 0);
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeServer() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  std::string request;  // the last request's head

 private:
  void serve() {
    while (!stop_) {
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      std::string head;
      char buf[1024];
      while (head.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = ::read(c, buf, sizeof buf);
        if (n <= 0) break;
        head.append(buf, static_cast<std::size_t>(n));
      }
      request = head;
      if (reply_.empty()) {
        while (!stop_ && ::read(c, buf, sizeof buf) > 0) {  // until the client gives up
        }
      } else {
        (void)!::write(c, reply_.data(), reply_.size());
      }
      ::close(c);
    }
  }

  std::string reply_;
  int fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

std::string http_reply(int status, const std::string& body) {
  return "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nContent-Type: text/plain\r\n\r\n" + body;
}

}  // namespace

TEST_CASE("a POST to /handler/<name> and its answer, an error status not ok with torch's text", "[worker_server]") {
  const auto [status, body] = GENERATE(table<int, std::string>({{200, "hello"}, {404, "Handler nosuch not found"}}));
  TempDir dir;
  FakeServer server(dir.path + "/w0.sock", http_reply(status, body));
  const WorkerServerReply r = ask_worker_server(dir.path + "/w0.sock", "dump_traceback", 2s);
  CHECK(r.ok == (status == 200));
  CHECK(r.status == status);
  CHECK(r.body == body);
  CHECK(r.error == (status == 200 ? "" : "status 404 from " + dir.path + "/w0.sock for dump_traceback: " + body));
  CHECK(server.request.rfind("POST /handler/dump_traceback HTTP/1.1\r\n", 0) == 0);
}

TEST_CASE("a socket path longer than sun_path is reached through its directory", "[worker_server]") {
  TempDir dir;
  std::string deep = dir.path;
  while (deep.size() < 200) deep += "/a-rather-long-directory-name";
  fs::create_directories(deep);
  const std::string path = deep + "/w0.sock";
  REQUIRE(path.size() > sizeof(sockaddr_un::sun_path));
  FakeServer server(path, http_reply(200, "deep"));
  const WorkerServerReply r = ask_worker_server(path, "dump_traceback", 2s);
  CHECK(r.ok);
  CHECK(r.body == "deep");
}

TEST_CASE("a server that never answers: not ok after the timeout", "[worker_server]") {
  TempDir dir;
  FakeServer server(dir.path + "/w0.sock", "");
  const auto t0 = std::chrono::steady_clock::now();
  const WorkerServerReply r = ask_worker_server(dir.path + "/w0.sock", "fr_trace_json", 300ms);
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK_FALSE(r.ok);
  CHECK(r.status == 0);
  CHECK(r.error == "no answer from " + dir.path + "/w0.sock to fr_trace_json within 300 ms");
  CHECK(took >= 300ms);
  CHECK(took < 3s);
}

TEST_CASE("no server: not ok, saying why", "[worker_server]") {
  TempDir dir;
  WorkerServerReply r = ask_worker_server(dir.path + "/none.sock", "dump_traceback", 1s);
  CHECK_FALSE(r.ok);
  CHECK(r.error.rfind("cannot connect to " + dir.path + "/none.sock: ", 0) == 0);
  r = ask_worker_server("/nonexistent-dir/" + std::string(200, 'x') + "/w.sock", "dump_traceback", 1s);
  CHECK_FALSE(r.ok);
  CHECK(r.error.rfind("cannot open the directory /nonexistent-dir/", 0) == 0);
}

TEST_CASE("torch's own worker server answers dump_traceback and fr_trace_json", "[worker_server][torch]") {
  const std::string python = DDP_TEST_PYTHON;
  if (python.empty() || std::system((python + " -c 'import torch' >/dev/null 2>&1").c_str()) != 0) {
    WARN("skipped: no torch in " << python);
    return;
  }
  TempDir dir;
  std::string deep = dir.path;
  while (deep.size() < 150) deep += "/long-enough-to-pass-sun-path";
  fs::create_directories(deep);
  const std::string path = deep + "/w0.sock";
  const std::string script =
      "import os, time\n"
      "from torch._C._distributed_c10d import _WorkerServer\n"
      "os.chdir(os.path.dirname(os.environ['SOCK']))\n"
      "s = _WorkerServer('w0.sock')\n"
      "time.sleep(120)\n";
  const std::string env_sock = "SOCK=" + path;
  char* argv[] = {const_cast<char*>(python.c_str()), const_cast<char*>("-c"), const_cast<char*>(script.c_str()),
                  nullptr};
  char* envp[] = {const_cast<char*>(env_sock.c_str()), nullptr};
  pid_t pid = -1;
  REQUIRE(::posix_spawn(&pid, python.c_str(), nullptr, nullptr, argv, envp) == 0);
  const auto deadline = std::chrono::steady_clock::now() + 90s;  // importing torch on a busy machine
  WorkerServerReply r;
  while (std::chrono::steady_clock::now() < deadline) {
    r = ask_worker_server(path, "dump_traceback", 5s);
    if (r.ok) break;
    std::this_thread::sleep_for(200ms);  // no event tells when a socket appears in another process
  }
  CHECK(r.ok);
  CHECK(r.body.find("time.sleep") == std::string::npos);  // faulthandler prints frames, not source
  CHECK(r.body.find("File \"<string>\", line 5 in <module>") != std::string::npos);
  const WorkerServerReply fr = ask_worker_server(path, "fr_trace_json", 5s);
  CHECK(fr.ok);
  CHECK(ddp::launcher::parse_fr_trace(fr.body).valid);
  const WorkerServerReply bad = ask_worker_server(path, "nosuch", 5s);
  CHECK_FALSE(bad.ok);
  CHECK(bad.body.find("not found") != std::string::npos);
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
}

TEST_CASE("dump_stack asks the worker's own server first, and says so", "[worker_server][stack_dump]") {
  TempDir dir;
  FakeServer server(dir.path + "/w0.sock",
                    http_reply(200, "Thread 0x1 (most recent call first):\n  File \"t.py\", line 1 in <module>\n"));
  ddp::launcher::StackDumpOptions o;
  o.timeout = 2s;
  o.sockets[::getpid()] = dir.path + "/w0.sock";
  const std::string text = ddp::launcher::dump_stack(::getpid(), o);
  CHECK(text.rfind("(Python stack from the worker's own server)\nThread 0x1", 0) == 0);
  o.sockets[::getpid()] = dir.path + "/none.sock";  // then the tools, the server's failure said
  const std::string fallback = ddp::launcher::dump_stack(::getpid(), o);
  CHECK(fallback.find("(its worker server: cannot connect to " + dir.path + "/none.sock") != std::string::npos);
}
