// See c10d_ranks.hpp.
#include "launcher/cli/c10d_ranks.hpp"

#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/udp.hpp>

#include "common/log.hpp"
#include "ddplaunch/rendezvous/endpoint.hpp"

namespace ddp::launcher {
namespace {

namespace asio = boost::asio;

std::string this_host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "";
  return name;
}

// Whether this machine may bind `address`: then it is one of its own.
bool bindable(const asio::ip::address& address) {
  asio::io_context io;
  asio::ip::udp::socket socket(io);
  boost::system::error_code ec;
  socket.open(address.is_v6() ? asio::ip::udp::v6() : asio::ip::udp::v4(), ec);
  if (!ec) socket.bind(asio::ip::udp::endpoint(address, 0), ec);
  return !ec;
}

}  // namespace

bool names_this_machine(const std::string& host) {
  const std::string bare = rendezvous::unbracket_host(host);
  if (bare == "localhost") return true;
  const std::string mine = this_host_name();
  if (!mine.empty() && (bare == mine || bare == mine.substr(0, mine.find('.')))) return true;
  asio::io_context io;
  asio::ip::tcp::resolver resolver(io);
  boost::system::error_code ec;
  const auto results = resolver.resolve(bare, "", ec);
  if (ec) return false;  // not resolvable here: another machine's name, or not published yet
  for (const auto& r : results) {
    const asio::ip::address a = r.endpoint().address();
    if (a.is_loopback() || bindable(a)) return true;
  }
  return false;
}

void apply_c10d_ranks(LaunchConfig& c) {
  c.rank_by_arrival = true;
  const bool host = names_this_machine(c.master_addr);
  c.node_rank = host ? 0 : 1;
  c.store_host_guessed = host;
  log::info("--rdzv_backend=c10d without a node rank: {}; nodes rank in order of arrival",
            host ? "this node hosts the store (" + c.master_addr + " names it)"
                 : "this node joins the store at " + c.master_addr);
}

}  // namespace ddp::launcher
