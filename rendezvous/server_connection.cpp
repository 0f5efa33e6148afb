// Per-connection reading, parsing and writing; see server_connection.hpp.
#include "rendezvous/server_connection.hpp"

#include <boost/asio/write.hpp>

#include "rendezvous/blocking_socket.hpp"
#include "rendezvous/error.hpp"
#include "rendezvous/tcp_store_server.hpp"

namespace ddp::rendezvous {

namespace asio = boost::asio;

ServerConnection::ServerConnection(TcpStoreServer& server, ClientId id, asio::ip::tcp::socket socket)
    : server_(server), id_(id), socket_(std::move(socket)) {
  boost::system::error_code ec;
  const auto ep = socket_.remote_endpoint(ec);
  peer_ = ec ? "unknown peer" : format_endpoint(ep.address().to_string(), ep.port());
  socket_.set_option(asio::ip::tcp::no_delay(true), ec);  // latency only; failure is harmless
}

void ServerConnection::start() {
  read_some();
}

void ServerConnection::read_some() {
  socket_.async_read_some(asio::buffer(buffer_),
                          [self = shared_from_this()](const boost::system::error_code& ec, std::size_t n) {
                            if (self->closed_) return;
                            if (ec) {
                              self->server_.on_close(self->id_, ec == asio::error::eof ? "" : ec.message());
                              return;
                            }
                            self->on_read(n);
                          });
}

void ServerConnection::on_read(std::size_t n) {
  std::string_view input(buffer_.data(), n);
  std::vector<Outgoing> outgoing;
  try {
    Request request;
    while (parser_.parse(input, request)) {
      server_.state_.handle(id_, std::move(request), outgoing);
      server_.deliver(outgoing);
      outgoing.clear();
      if (closed_) return;
    }
  } catch (const Error& e) {
    server_.deliver(outgoing);
    server_.on_close(id_, e.what());
    return;
  }
  read_some();
}

void ServerConnection::send(std::string bytes) {
  if (closed_) return;
  write_queue_.push_back(std::move(bytes));
  if (write_queue_.size() == 1) write_next();
}

void ServerConnection::write_next() {
  asio::async_write(socket_, asio::buffer(write_queue_.front()),
                    [self = shared_from_this()](const boost::system::error_code& ec, std::size_t) {
                      if (self->closed_) return;
                      if (ec) {
                        self->server_.on_close(self->id_, "write failed: " + ec.message());
                        return;
                      }
                      self->write_queue_.pop_front();
                      if (!self->write_queue_.empty()) self->write_next();
                    });
}

void ServerConnection::close() {
  if (closed_) return;
  closed_ = true;
  boost::system::error_code ignored;  // the peer may already be gone; nothing left to report
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
}

}  // namespace ddp::rendezvous
