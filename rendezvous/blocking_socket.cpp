// Deadline-bounded blocking I/O built from Asio async operations: start the operation, run the
// private io_context until it completes or the deadline passes, and cancel it on the deadline.
#include "rendezvous/blocking_socket.hpp"

#include <sys/socket.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include "ddplaunch/rendezvous/endpoint.hpp"
#include "ddplaunch/rendezvous/error.hpp"

namespace ddp::rendezvous {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

BlockingSocket::BlockingSocket(const std::string& host, std::uint16_t port, TimePoint deadline)
    : socket_(io_), peer_(format_endpoint(host, port)) {
  tcp::resolver resolver(io_);
  boost::system::error_code ec;
  const auto endpoints = resolver.resolve(unbracket_host(host), std::to_string(port), ec);
  if (ec) {
    throw ConnectionError("cannot resolve store host '" + host + "': " + ec.message() +
                          "; check the address (an IPv6 address goes in brackets: [::1])");
  }
  bool done = false;
  boost::system::error_code result;
  asio::async_connect(socket_, endpoints, [&](const boost::system::error_code& e, const tcp::endpoint&) {
    result = e;
    done = true;
  });
  run_until(deadline, done, "connecting");
  if (result) throw ConnectionError("cannot connect to " + peer_ + ": " + result.message());
  socket_.set_option(tcp::no_delay(true), ec);  // best effort: only latency depends on it
  const tcp::endpoint self = socket_.local_endpoint(ec);
  if (!ec) local_ = self.address().to_string();
  std::lock_guard<std::mutex> lock(fd_mutex_);
  fd_ = socket_.native_handle();
}

void BlockingSocket::interrupt() {
  // ::shutdown on the descriptor is thread-safe, unlike the Asio socket object; the blocked
  // operation then sees end-of-file or an error.
  std::lock_guard<std::mutex> lock(fd_mutex_);
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

void BlockingSocket::run_until(TimePoint deadline, const bool& done, const char* what) {
  io_.restart();
  while (!done && io_.run_one_until(deadline) > 0) {
  }
  if (done) return;
  // Deadline passed: cancel and let the handler run (it may also have completed meanwhile,
  // in which case the caller sees a normal result).
  boost::system::error_code ignored;  // cancel on a closed socket fails harmlessly
  socket_.cancel(ignored);
  io_.restart();
  io_.run();
  if (done && socket_.is_open()) {
    // The handler ran; the caller inspects its error code (operation_aborted = timed out).
    return;
  }
  throw TimeoutError("timed out " + std::string(what) + " " + peer_);
}

void BlockingSocket::write_all(const std::string& bytes, TimePoint deadline) {
  bool done = false;
  boost::system::error_code result;
  asio::async_write(socket_, asio::buffer(bytes), [&](const boost::system::error_code& e, std::size_t) {
    result = e;
    done = true;
  });
  run_until(deadline, done, "sending to");
  if (result == asio::error::operation_aborted) throw TimeoutError("timed out sending to " + peer_);
  if (result) throw ConnectionError("connection to " + peer_ + " lost while sending: " + result.message());
}

std::string BlockingSocket::read_exact(std::size_t n, TimePoint deadline) {
  std::string out(n, '\0');
  bool done = false;
  boost::system::error_code result;
  asio::async_read(socket_, asio::buffer(out), [&](const boost::system::error_code& e, std::size_t) {
    result = e;
    done = true;
  });
  run_until(deadline, done, "waiting for a reply from");
  if (result == asio::error::operation_aborted) {
    throw TimeoutError("timed out waiting for a reply from " + peer_);
  }
  if (result == asio::error::eof) {
    throw ConnectionError("connection to " + peer_ + " closed by the server");
  }
  if (result) throw ConnectionError("connection to " + peer_ + " lost: " + result.message());
  return out;
}

void BlockingSocket::close() {
  std::lock_guard<std::mutex> lock(fd_mutex_);
  fd_ = -1;
  boost::system::error_code ignored;  // closing an already-broken socket has nothing to report
  socket_.shutdown(tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
}

}  // namespace ddp::rendezvous
