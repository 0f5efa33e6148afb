// See etcd_tls_proxy.hpp.
#include "launcher/etcd/etcd_tls_proxy.hpp"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>

#include "common/host_port.hpp"
#include "ddplaunch/common/error.hpp"

namespace ddp::launcher {
namespace {

namespace asio = boost::asio;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using boost::system::error_code;

struct Member {
  std::string host;  // unbracketed
  std::string port;
  std::string text;  // as given, for messages
};

// "0100007F:1F90" (/proc/net/tcp's little-endian IPv4 and hex port) for 127.0.0.1:8080.
std::string proc_net_tcp_address(const tcp::endpoint& e) {
  const auto bytes = e.address().to_v4().to_bytes();
  return fmt::format("{:02X}{:02X}{:02X}{:02X}:{:04X}", bytes[3], bytes[2], bytes[1], bytes[0], e.port());
}

// The uid owning the socket at `peer` connected to `local`, from /proc/net/tcp (a loopback TCP
// peer has no SO_PEERCRED; identd reads the same table); -1 when not found.
long peer_uid(const tcp::endpoint& local, const tcp::endpoint& peer) {
  if (!peer.address().is_v4()) return -1;
  std::ifstream table("/proc/net/tcp");
  const std::string want_local = proc_net_tcp_address(peer), want_remote = proc_net_tcp_address(local);
  std::string line;
  std::getline(table, line);  // header
  while (std::getline(table, line)) {
    std::istringstream fields(line);
    std::string slot, local_address, remote_address, state, queues, timer, retransmits;
    long uid = -1;
    fields >> slot >> local_address >> remote_address >> state >> queues >> timer >> retransmits >> uid;
    if (local_address == want_local && remote_address == want_remote) return uid;
  }
  return -1;
}

// Prints a member's failure, once until it changes: the client retries many times a second.
// The proxy runs one I/O thread, so no lock.
void report(const Member& member, const std::string& what) {
  static std::map<std::string, std::string> last;
  std::string& before = last[member.text];
  if (before == what) return;
  before = what;
  std::fprintf(stderr, "ddplaunch-etcd-tls: etcd member %s: %s\n", member.text.c_str(), what.c_str());
}

// One client connection relayed to one member over TLS.
class Relay : public std::enable_shared_from_this<Relay> {
 public:
  Relay(tcp::socket client, ssl::context& tls, const Member& member)
      : client_(std::move(client)),
        resolver_(client_.get_executor()),
        server_(client_.get_executor(), tls),
        member_(member) {}

  void start() {
    auto self = shared_from_this();
    resolver_.async_resolve(member_.host, member_.port, [self](error_code ec, tcp::resolver::results_type found) {
      if (ec) return self->fail("resolve", ec);
      asio::async_connect(self->server_.lowest_layer(), found, [self](error_code ec, const tcp::endpoint&) {
        if (ec) return self->fail("connect", ec);
        error_code not_ip;
        asio::ip::make_address(self->member_.host, not_ip);
        if (not_ip) SSL_set_tlsext_host_name(self->server_.native_handle(), self->member_.host.c_str());
        self->server_.set_verify_mode(ssl::verify_peer);
        self->server_.set_verify_callback(ssl::host_name_verification(self->member_.host));
        self->server_.async_handshake(ssl::stream_base::client, [self](error_code ec) {
          if (ec) return self->fail("TLS handshake", ec);
          self->relay(self->client_, self->server_, self->up_);
          self->relay(self->server_, self->client_, self->down_);
        });
      });
    });
  }

 private:
  // Relays `from` to `to` through `buffer` until either side ends. A TLS error on the way is
  // reported: a member that refuses the client certificate (TLS 1.3) says so after the handshake.
  template <class From, class To>
  void relay(From& from, To& to, std::array<char, 16384>& buffer) {
    auto self = shared_from_this();
    from.async_read_some(asio::buffer(buffer), [self, &from, &to, &buffer](error_code ec, std::size_t n) {
      if (ec && ec.category() == asio::error::get_ssl_category() && ec != ssl::error::stream_truncated) {
        return self->fail("TLS", ec);
      }
      if (ec) return self->close();
      asio::async_write(to, asio::buffer(buffer, n), [self, &from, &to, &buffer](error_code ec, std::size_t) {
        if (ec) return self->close();
        self->relay(from, to, buffer);
      });
    });
  }
  void fail(const char* step, const error_code& ec) {
    std::string why = ec.message();
    if (ec.category() == asio::error::get_ssl_category()) {
      const long verify = SSL_get_verify_result(server_.native_handle());
      if (verify != X509_V_OK) why += std::string(" (") + X509_verify_cert_error_string(verify) + ")";
    }
    report(member_, std::string(step) + " failed: " + why);
    close();
  }
  void close() {
    error_code ignored;
    client_.close(ignored);
    server_.lowest_layer().close(ignored);
  }

  tcp::socket client_;
  tcp::resolver resolver_;
  ssl::stream<tcp::socket> server_;
  const Member& member_;
  std::array<char, 16384> up_{};
  std::array<char, 16384> down_{};
};

}  // namespace

struct EtcdTlsProxy::Impl {
  asio::io_context io;
  ssl::context tls{ssl::context::tls_client};
  std::vector<Member> members;
  std::vector<std::unique_ptr<tcp::acceptor>> acceptors;

  void accept(std::size_t i) {
    acceptors[i]->async_accept([this, i](error_code ec, tcp::socket client) {
      if (ec == asio::error::operation_aborted) return;
      if (!ec) {
        error_code e1, e2;
        const tcp::endpoint local = client.local_endpoint(e1), peer = client.remote_endpoint(e2);
        if (!e1 && !e2 && peer_uid(local, peer) == static_cast<long>(::getuid())) {
          std::make_shared<Relay>(std::move(client), tls, members[i])->start();
        } else {
          std::fprintf(stderr, "ddplaunch-etcd-tls: refused a connection from %s: not this user's\n",
                       peer.address().to_string().c_str());
        }
      }
      accept(i);
    });
  }
};

EtcdTlsProxy::EtcdTlsProxy(const EtcdTlsOptions& o) : impl_(std::make_unique<Impl>()) {
  const auto load = [](const char* what, const std::string& file, auto&& fn) {
    if (!std::ifstream(file)) {
      throw UsageError(fmt::format("--rdzv_conf {}={} cannot be read ({}); give a readable PEM file", what, file,
                                   std::strerror(errno)));
    }
    error_code ec;
    fn(ec);
    if (ec) {
      const unsigned long detail = ERR_get_error();
      throw UsageError(fmt::format("--rdzv_conf {}={} is not a usable PEM file ({}); give the {} in PEM form", what,
                                   file, detail ? ERR_reason_error_string(detail) : ec.message(),
                                   std::string(what) == "key" ? "private key" : "certificate"));
    }
  };
  auto& tls = impl_->tls;
  if (o.ca_file.empty()) {
    tls.set_default_verify_paths();
  } else {
    load("cacert", o.ca_file, [&](error_code& ec) { tls.load_verify_file(o.ca_file, ec); });
  }
  if (!o.cert_file.empty()) {
    load("cert", o.cert_file, [&](error_code& ec) { tls.use_certificate_chain_file(o.cert_file, ec); });
    load("key", o.key_file, [&](error_code& ec) { tls.use_private_key_file(o.key_file, ssl::context::pem, ec); });
  }
  for (const std::string& text : o.members) {
    const HostPort member = parse_host_port(
        text, {.name = "etcd member", .fix = "give each as HOST:PORT, e.g. 10.0.0.5:2379", .port_required = true});
    impl_->members.push_back({member.host, std::to_string(*member.port), text});
    impl_->acceptors.push_back(
        std::make_unique<tcp::acceptor>(impl_->io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)));
  }
  for (std::size_t i = 0; i < impl_->acceptors.size(); ++i) impl_->accept(i);
}

EtcdTlsProxy::~EtcdTlsProxy() = default;

std::vector<std::uint16_t> EtcdTlsProxy::ports() const {
  std::vector<std::uint16_t> out;
  for (const auto& a : impl_->acceptors) out.push_back(a->local_endpoint().port());
  return out;
}

void EtcdTlsProxy::run() {
  impl_->io.run();
}

void EtcdTlsProxy::stop() {
  impl_->io.stop();
}

}  // namespace ddp::launcher
