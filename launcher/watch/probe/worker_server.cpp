// See worker_server.hpp.
#include "launcher/watch/probe/worker_server.hpp"

#include <fmt/format.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core/basic_stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include "launcher/watch/probe/socket_path.hpp"

namespace ddp::launcher {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using Local = asio::local::stream_protocol;

constexpr std::uint64_t kBodyLimit = 64ull * 1024 * 1024;

}  // namespace

WorkerServerReply ask_worker_server(const std::string& socket_path, const std::string& handler,
                                    std::chrono::milliseconds timeout) {
  return ask_unix_http(socket_path, true, "/handler/" + handler, handler, timeout);
}

WorkerServerReply ask_unix_http(const std::string& socket_path, bool post, const std::string& target,
                                const std::string& what, std::chrono::milliseconds timeout) {
  WorkerServerReply reply;
  const SocketPath reachable(socket_path);
  const std::string& path = reachable.usable();
  if (path.empty()) {
    reply.error = reachable.error();
    return reply;
  }

  asio::io_context io;
  beast::basic_stream<Local> stream(io);
  beast::flat_buffer buffer;
  http::request<http::empty_body> request{post ? http::verb::post : http::verb::get, target, 11};
  request.set(http::field::host, "localhost");
  if (post) request.content_length(0);
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
    reply.error = fmt::format("no answer from {} to {} within {} ms", socket_path, what, timeout.count());
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
        fmt::format("status {} from {} for {}: {}", reply.status, socket_path, what, reply.body.substr(0, 200));
  return reply;
}

}  // namespace ddp::launcher
