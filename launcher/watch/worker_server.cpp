// See worker_server.hpp.
#include "launcher/watch/worker_server.hpp"

#include <fcntl.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core/basic_stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

namespace ddp::launcher {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using Local = asio::local::stream_protocol;

constexpr std::uint64_t kBodyLimit = 64ull * 1024 * 1024;

// Closes the directory descriptor a long path is reached through, once connected (or not).
class DirectoryFd {
 public:
  DirectoryFd() = default;
  DirectoryFd(const DirectoryFd&) = delete;
  DirectoryFd& operator=(const DirectoryFd&) = delete;
  ~DirectoryFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int fd_ = -1;
};

// The path to connect to: the path itself if it fits in sun_path, else /proc/self/fd/<n>/<name>
// through the directory opened in `dir`; "" with `why` if neither can be.
std::string reachable_path(const std::string& path, DirectoryFd& dir, std::string& why) {
  if (path.size() < sizeof(sockaddr_un::sun_path)) return path;
  const std::size_t slash = path.rfind('/');
  const std::string parent = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  dir.fd_ = ::open(parent.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir.fd_ < 0) {
    why = fmt::format("cannot open the directory {}: {}", parent, std::strerror(errno));
    return "";
  }
  std::string proc = fmt::format("/proc/self/fd/{}/{}", dir.fd_, name);
  if (proc.size() >= sizeof(sockaddr_un::sun_path)) {
    why = fmt::format("the socket name {} is too long ({} bytes) to connect to", name, name.size());
    return "";
  }
  return proc;
}

}  // namespace

WorkerServerReply ask_worker_server(const std::string& socket_path, const std::string& handler,
                                    std::chrono::milliseconds timeout) {
  WorkerServerReply reply;
  DirectoryFd dir;
  const std::string path = reachable_path(socket_path, dir, reply.error);
  if (path.empty()) return reply;

  asio::io_context io;
  beast::basic_stream<Local> stream(io);
  beast::flat_buffer buffer;
  http::request<http::empty_body> request{http::verb::post, "/handler/" + handler, 11};
  request.set(http::field::host, "localhost");
  request.content_length(0);
  http::response_parser<http::string_body> parser;
  parser.body_limit(kBodyLimit);
  const char* stage = "connect to";
  beast::error_code failure;

  // One deadline for the whole exchange: basic_stream keeps it across its operations.
  stream.expires_after(timeout);
  stream.async_connect(Local::endpoint(path), [&](beast::error_code ec) {
    if (ec) {
      failure = ec;
      return;
    }
    stage = "send to";
    http::async_write(stream, request, [&](beast::error_code ec, std::size_t) {
      if (ec) {
        failure = ec;
        return;
      }
      stage = "read from";
      http::async_read(stream, buffer, parser, [&](beast::error_code ec, std::size_t) { failure = ec; });
    });
  });
  io.run();

  if (failure == beast::error::timeout) {
    reply.error = fmt::format("no answer from {} to {} within {} ms", socket_path, handler, timeout.count());
    return reply;
  }
  if (failure) {
    reply.error = fmt::format("cannot {} {}: {}", stage, socket_path, failure.message());
    return reply;
  }
  const auto& response = parser.get();
  reply.status = static_cast<int>(response.result_int());
  reply.body = response.body();
  reply.ok = reply.status == 200;
  if (!reply.ok)
    reply.error =
        fmt::format("status {} from {} for {}: {}", reply.status, socket_path, handler, reply.body.substr(0, 200));
  return reply;
}

}  // namespace ddp::launcher
