// Simulated PyTorch workers doing what torch 2.15's init_process_group(init_method="env://") does
// on the store under torchrun (TORCHELASTIC_USE_AGENT_STORE=True, TORCH_DIST_INIT_BARRIER=1),
// many ranks per process on one Asio thread, against any TCPStore server.
//
//   rendezvous_scale HOST PORT WORLD FIRST COUNT [options]
//     simulates ranks FIRST … FIRST+COUNT-1 of a world of WORLD ranks
//     --group G        process group name, part of the keys (default "0"; vary it to rerun
//                      against a server that still holds an earlier run's keys)
//     --sources A,B,…  local addresses to connect from, used in turn (default: the kernel's
//                      choice). Linux picks a connect()'s ephemeral port by scanning for a free
//                      one per source address, which slows down sharply once thousands of ports
//                      to one server are in use (16K connections from one address cost ~3 s of
//                      kernel time in this client); a few thousand per address keeps it flat,
//                      and ~28K ports per address is the hard ceiling.
//     --window W       handshakes in flight at once (default 512), so that the listen backlog
//                      (net.core.somaxconn) never overflows: an overflow costs a 1 s SYN retry
//     --timeout S      give up after S seconds (default 120)
//     --pattern P      init (default: the rendezvous below), or one of the store's worst cases
//                      ("storms", every rank at once on one key), see "Storms" below
//
// Each rank, as observed on the wire from a torch 2.15 worker (gloo's per-peer gets left out):
//   1. connect; VALIDATE + PING (nonce = rank), wait for the echo
//   2. ADD "init/" 1                                   (TCPStore(world_size=WORLD))
//   3. SET "/default_pg/G//cpu//0/<rank>" = 170 bytes  (the backend publishes its address)
//   4. ADD "/default_pg/store_based_barrier_key:G" 1, then ADD … 0 to read the count
//   5. the rank that reads WORLD sets "…:G:last_worker" = "1"
//   6. WAIT ["…:G:last_worker"]: the rank is released
// The store is kept open until the process exits, as a worker does.
//
// Storms (--pattern wait|get|add|multiget). Each rank connects, VALIDATE + PING, SETs its address
// "storm/G/addr/<rank>" (170 bytes) and ADDs 1 to "storm/G/arrived"; then
//   wait      WAIT ["storm/G/go"]                       (every rank waits on one key)
//   get       WAIT + GET "storm/G/go" (170 bytes)       (c10d's get of a key set last: a barrier storm)
//   add       WAIT, then ADD "storm/G/count" 1          (every rank adds to one key at once)
//   multiget  nothing more; the controller MULTI_GETs every rank's address (WORLD keys)
// The process that simulates rank 0 also opens a controller connection. Once all of its own ranks'
// ADDs are answered a process prints "connected"; the controller then waits for a second line on
// stdin ("storm"), notes the time and SETs "storm/G/go" (or sends the MULTI_GET), so the driver can
// read the server's CPU and memory between the connect phase and the storm. Every WAIT is on the
// wire before "connected" only as far as the client can tell (a WAIT has no acknowledgement); one
// that reaches the server after the SET is answered at once, as c10d's would be.
// Its JSON line adds "pattern", "connected_ns" (the last own ADD answered) and, from the
// controller's process, "storm_start_ns" (the SET or MULTI_GET sent) and "storm_done_ns" (the
// MULTI_GET's reply read; for the others last_release_ns is the end of the storm).
//
// Protocol: after start-up the program prints "ready" and waits for a line on stdin, so a
// driver can start several processes and release them together. At the end it prints one JSON
// line with CLOCK_MONOTONIC nanoseconds (comparable across processes):
//   {"ranks": N, "first_connect_ns": T0, "last_release_ns": T1, "connect_retries": R, "fd_limit": L}
// Exit 1 (with a message) on a failed rank or the timeout.
#include <sys/resource.h>

#include <netinet/in.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include "bench/load_session.hpp"

namespace asio = boost::asio;
namespace bench = ddp::bench;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  tcp::endpoint server;
  std::int64_t world = 0;
  std::int64_t first = 0;
  std::int64_t count = 0;
  std::string group = "0";
  std::vector<asio::ip::address> sources;
  int window = 512;
  int timeout_s = 120;
  std::string pattern = "init";
};

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

class Rank;

// Shared by the ranks of this process: the connect window and the results.
struct Run {
  Options options;
  asio::io_context io{1};
  std::vector<std::unique_ptr<Rank>> ranks;
  std::size_t next_to_start = 0;
  int in_flight = 0;
  std::int64_t released = 0;
  std::int64_t failed = 0;
  std::int64_t retries = 0;
  std::int64_t first_connect_ns = 0;
  std::int64_t last_release_ns = 0;
  std::string barrier_key, last_worker_key;
  // Storms: keys, this process's ranks whose ADD was answered, and the controller's times.
  std::string storm_prefix;
  std::int64_t arrived = 0;
  std::int64_t connected_ns = 0;
  std::int64_t storm_start_ns = 0;
  std::int64_t storm_done_ns = 0;
  bool controller_pending = false;  // a controller exists and its storm has not completed
  void start_more();
  void finished_one() {
    if (released + failed == options.count && !controller_pending) io.stop();
  }
};

class Rank final : public bench::LoadSession {
 public:
  Rank(Run& run, std::int64_t rank) : LoadSession(run.io), run_(run), rank_(rank), retry_(run.io) {}

  void connect() {
    if (run_.first_connect_ns == 0) run_.first_connect_ns = now_ns();
    boost::system::error_code ec;
    socket_.open(tcp::v4(), ec);
    const auto& sources = run_.options.sources;
    if (!ec && !sources.empty()) {
      // Bind only the address; the port is picked at connect time, per destination, so many
      // sockets can share a local port to different servers (IP_BIND_ADDRESS_NO_PORT).
      const int one = 1;
      setsockopt(socket_.native_handle(), IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
      const auto& source = sources[static_cast<std::size_t>(rank_) % sources.size()];
      socket_.bind(tcp::endpoint(source, 0), ec);
    }
    if (ec) return fail("cannot open a socket: " + ec.message());
    socket_.async_connect(run_.options.server, [this](const boost::system::error_code& cec) {
      if (cec) return retry(cec);
      connected();
      step_ = 0;
      out_.clear();
      bench::append_handshake(out_, static_cast<std::uint32_t>(rank_));
      exchange(out_, bench::ReplyShape::fixed(4));
    });
  }

 private:
  // Like c10d's client: a refused or failed connect is retried with a growing delay.
  void retry(const boost::system::error_code& ec) {
    ++run_.retries;
    boost::system::error_code ignored;  // a socket that never connected; nothing to report
    socket_.close(ignored);
    if (++attempts_ > 20) return fail("connect failed 20 times: " + ec.message());
    retry_.expires_after(std::chrono::milliseconds(10 << std::min(attempts_, 6)));
    retry_.async_wait([this](const boost::system::error_code& tec) {
      if (!tec) connect();
    });
  }

  void on_reply(std::int64_t value) override {
    out_.clear();
    if (step_ == 0) {  // PING echoed: the server has accepted us; the next connect may start
      if (value != static_cast<std::uint32_t>(rank_)) return fail("PING echo mismatch");
      --run_.in_flight;
      run_.start_more();
    }
    if (run_.options.pattern != "init") return storm_step();
    switch (step_++) {
      case 0:
        bench::append_add(out_, "init/", 1);
        return exchange(out_, bench::ReplyShape::fixed(8));
      case 1:
        bench::append_set(out_, "/default_pg/" + run_.options.group + "//cpu//0/" + std::to_string(rank_),
                          std::string(170, 'a'));
        return exchange(out_, bench::ReplyShape::none());
      case 2:
        bench::append_add(out_, run_.barrier_key, 1);
        return exchange(out_, bench::ReplyShape::fixed(8));
      case 3:
        bench::append_add(out_, run_.barrier_key, 0);
        return exchange(out_, bench::ReplyShape::fixed(8));
      case 4:
        if (value == run_.options.world) {
          bench::append_set(out_, run_.last_worker_key, "1");
          return exchange(out_, bench::ReplyShape::none());
        }
        [[fallthrough]];
      case 5:
        step_ = 6;
        out_.clear();
        bench::append_wait(out_, run_.last_worker_key);
        return exchange(out_, bench::ReplyShape::fixed(1));
      case 6:
        return release();
    }
  }

  // The steps of a storm (header), after the handshake.
  void storm_step() {
    const std::string& pattern = run_.options.pattern;
    switch (step_++) {
      case 0:
        bench::append_set(out_, run_.storm_prefix + "addr/" + std::to_string(rank_), std::string(170, 'a'));
        return exchange(out_, bench::ReplyShape::none());
      case 1:
        bench::append_add(out_, run_.storm_prefix + "arrived", 1);
        return exchange(out_, bench::ReplyShape::fixed(8));
      case 2:
        if (++run_.arrived == run_.options.count) {
          run_.connected_ns = now_ns();
          std::printf("connected\n");
          std::fflush(stdout);
        }
        if (pattern == "multiget") return release();
        bench::append_wait(out_, run_.storm_prefix + "go");
        return exchange(out_, bench::ReplyShape::fixed(1));
      case 3:
        if (pattern == "get") {
          bench::append_get(out_, run_.storm_prefix + "go");
          return exchange(out_, bench::ReplyShape::string());
        }
        if (pattern == "add") {
          bench::append_add(out_, run_.storm_prefix + "count", 1);
          return exchange(out_, bench::ReplyShape::fixed(8));
        }
        [[fallthrough]];
      default:
        return release();
    }
  }

  void release() {
    run_.last_release_ns = std::max(run_.last_release_ns, now_ns());
    ++run_.released;
    run_.finished_one();
  }
  void on_failure(const boost::system::error_code& ec) override { fail(ec.message()); }

  void fail(const std::string& why) {
    if (run_.failed++ < 5) std::fprintf(stderr, "rendezvous_scale: rank %lld: %s\n", (long long)rank_, why.c_str());
    run_.finished_one();
  }

  Run& run_;
  std::int64_t rank_;
  asio::steady_timer retry_;
  int attempts_ = 0;
  int step_ = 0;
  std::string out_;
};

// A storm's controller: one more connection, opened before "ready", that starts the storm when the
// driver says so (SET of the go key, or the MULTI_GET of every rank's address).
class Controller final : public bench::LoadSession {
 public:
  explicit Controller(Run& run) : LoadSession(run.io), run_(run) {}

  // Blocks until connected and the handshake is answered; throws boost::system::system_error.
  void open() {
    socket_.connect(run_.options.server);
    std::string hello;
    bench::append_handshake(hello, 0xC0DE);
    boost::asio::write(socket_, asio::buffer(hello));
    char echo[4];
    boost::asio::read(socket_, asio::buffer(echo));
    connected();
  }

  // On the loop thread: starts the storm.
  void fire() {
    out_.clear();
    run_.storm_start_ns = now_ns();
    if (run_.options.pattern == "multiget") {
      std::vector<std::string> keys;
      keys.reserve(static_cast<std::size_t>(run_.options.world));
      for (std::int64_t r = 0; r < run_.options.world; ++r) keys.push_back(run_.storm_prefix + "addr/" + std::to_string(r));
      bench::append_multi_get(out_, keys);
      return exchange(out_, bench::ReplyShape::strings(static_cast<std::size_t>(run_.options.world)));
    }
    bench::append_set(out_, run_.storm_prefix + "go", std::string(170, 'g'));
    exchange(out_, bench::ReplyShape::none());
  }

 private:
  void on_reply(std::int64_t) override {
    run_.storm_done_ns = now_ns();
    run_.controller_pending = false;
    run_.finished_one();
  }
  void on_failure(const boost::system::error_code& ec) override {
    std::fprintf(stderr, "rendezvous_scale: the storm's controller failed: %s\n", ec.message().c_str());
    ++run_.failed;
    run_.controller_pending = false;
    run_.finished_one();
  }

  Run& run_;
  std::string out_;
};

void Run::start_more() {
  while (in_flight < options.window && next_to_start < ranks.size()) {
    ++in_flight;
    ranks[next_to_start++]->connect();
  }
}

// Raises the soft descriptor limit to the hard one; returns the limit now in force.
rlim_t raise_fd_limit() {
  rlimit lim{};
  getrlimit(RLIMIT_NOFILE, &lim);
  if (lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
    getrlimit(RLIMIT_NOFILE, &lim);
  }
  return lim.rlim_cur;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr,
                 "usage: rendezvous_scale HOST PORT WORLD FIRST COUNT [--group G] [--sources A,B,...] [--window W] "
                 "[--timeout S] [--pattern init|wait|get|add|multiget]\n");
    return 2;
  }
  Run run;
  Options& o = run.options;
  boost::system::error_code host_ec;
  o.server = tcp::endpoint(asio::ip::make_address(argv[1], host_ec), static_cast<std::uint16_t>(std::atoi(argv[2])));
  if (host_ec) {
    std::fprintf(stderr, "rendezvous_scale: HOST must be an IP address, not '%s'\n", argv[1]);
    return 2;
  }
  o.world = std::atoll(argv[3]);
  o.first = std::atoll(argv[4]);
  o.count = std::atoll(argv[5]);
  for (int i = 6; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--group") {
      o.group = argv[i + 1];
    } else if (flag == "--sources") {
      std::string list = argv[i + 1];
      for (std::size_t start = 0; start <= list.size();) {
        const std::size_t comma = std::min(list.find(',', start), list.size());
        boost::system::error_code ec;
        if (comma > start) o.sources.push_back(asio::ip::make_address(list.substr(start, comma - start), ec));
        if (ec) {
          std::fprintf(stderr, "rendezvous_scale: bad address in --sources %s\n", list.c_str());
          return 2;
        }
        start = comma + 1;
      }
    } else if (flag == "--window") {
      o.window = std::max(1, std::atoi(argv[i + 1]));
    } else if (flag == "--timeout") {
      o.timeout_s = std::max(1, std::atoi(argv[i + 1]));
    } else if (flag == "--pattern") {
      o.pattern = argv[i + 1];
      if (o.pattern != "init" && o.pattern != "wait" && o.pattern != "get" && o.pattern != "add" &&
          o.pattern != "multiget") {
        std::fprintf(stderr, "rendezvous_scale: unknown --pattern %s (init, wait, get, add or multiget)\n",
                     o.pattern.c_str());
        return 2;
      }
    } else {
      std::fprintf(stderr, "rendezvous_scale: unknown option %s\n", flag.c_str());
      return 2;
    }
  }
  const rlim_t fd_limit = raise_fd_limit();
  if (static_cast<rlim_t>(o.count) + 16 > fd_limit) {
    std::fprintf(stderr,
                 "rendezvous_scale: %lld ranks need as many descriptors but RLIMIT_NOFILE is %llu (the hard "
                 "limit); run fewer ranks per process\n",
                 (long long)o.count, (unsigned long long)fd_limit);
    return 2;
  }
  run.barrier_key = "/default_pg/store_based_barrier_key:" + o.group;
  run.last_worker_key = run.barrier_key + ":last_worker";
  run.storm_prefix = "storm/" + o.group + "/";
  for (std::int64_t r = 0; r < o.count; ++r) run.ranks.push_back(std::make_unique<Rank>(run, o.first + r));
  Controller controller(run);
  const bool controls = o.pattern != "init" && o.first == 0;
  if (controls) {
    try {
      controller.open();
    } catch (const boost::system::system_error& e) {
      std::fprintf(stderr, "rendezvous_scale: the storm's controller cannot connect: %s\n", e.what());
      return 1;
    }
    run.controller_pending = true;
  }

  std::printf("ready\n");
  std::fflush(stdout);
  std::string go;
  std::getline(std::cin, go);
  if (controls) {
    // The second line starts the storm; the reader blocks on stdin, so it is a thread of its own.
    std::thread([&run, &controller] {
      std::string line;
      if (std::getline(std::cin, line)) asio::post(run.io, [&controller] { controller.fire(); });
    }).detach();
  }

  asio::steady_timer deadline(run.io, std::chrono::seconds(o.timeout_s));
  bool timed_out = false;
  deadline.async_wait([&](const boost::system::error_code& ec) {
    if (ec) return;
    timed_out = true;
    run.io.stop();
  });
  asio::post(run.io, [&run] { run.start_more(); });
  run.io.run();
  if (timed_out || run.failed > 0) {
    std::fprintf(stderr, "rendezvous_scale: %lld of %lld ranks released, %lld failed%s (ranks %lld…%lld of %lld)\n",
                 (long long)run.released, (long long)o.count, (long long)run.failed,
                 timed_out ? (", timed out after " + std::to_string(o.timeout_s) + " s").c_str() : "",
                 (long long)o.first, (long long)(o.first + o.count - 1), (long long)o.world);
    std::_Exit(1);  // skip closing tens of thousands of sockets one by one
  }
  std::printf(
      "{\"ranks\": %lld, \"first_connect_ns\": %lld, \"last_release_ns\": %lld, \"connect_retries\": %lld, "
      "\"fd_limit\": %llu, \"pattern\": \"%s\", \"connected_ns\": %lld, \"storm_start_ns\": %lld, "
      "\"storm_done_ns\": %lld}\n",
      (long long)o.count, (long long)run.first_connect_ns, (long long)run.last_release_ns, (long long)run.retries,
      (unsigned long long)fd_limit, o.pattern.c_str(), (long long)run.connected_ns, (long long)run.storm_start_ns,
      (long long)run.storm_done_ns);
  std::fflush(stdout);
  std::_Exit(0);
}
