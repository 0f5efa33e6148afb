// Load generator for a TCPStore server (ours or PyTorch's) and for the loopback floor: CONNS
// connections driven by THREADS Asio event-loop threads (default 1), each connection with one
// request in flight at a time like a real PyTorch client (no pipelining).
//
//   store_load run HOST PORT CONNS SECONDS MODE [THREADS]
//     mix             each connection in turn: set / get (WAIT + GET) / add / check, as a PyTorch
//                     client issues them; set has no reply, so it completes when sent
//     pingpong        pairs of connections: one sets a key and waits for the answer key, the
//                     other waits for the key and sets the answer; a round trip is one op
//     pipelined:D     NOT what PyTorch clients do: D ADD requests sent in one write, then their
//                     D replies read; counts D ops per batch (the latency is the batch's)
//     floor-echo:Q:R  against `serve-floor echo Q R`: send Q bytes, read R bytes
//     floor-relay:B   against `serve-floor relay`: pairs; B bytes there and B bytes back
//     floor-pingpong:M against `serve-floor pingpong M`: pairs, the wire pattern of pingpong
//                     (each side writes a SET and then its next WAIT, M bytes each, and reads
//                     a 1-byte STOP_WAITING) with nothing but byte counting behind it
//   store_load serve-floor echo Q R | relay | pingpong M
//     the floor server (floor_server.hpp); prints "port=P", serves until stdin closes
//
// `run` connects everything, handshakes (VALIDATE + PING for the store modes), runs a warm-up
// (0.2 s, or half of SECONDS if shorter), then measures for SECONDS and prints one JSON line:
//   {"ops": N, "ops_per_s": X, "p50_us": Y, "p99_us": Z, "ops_total": T}
// ops_total also counts the warm-up and the tail, for dividing the server's CPU time by.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio/post.hpp>

#include "bench/floor_server.hpp"
#include "bench/load_session.hpp"

namespace asio = boost::asio;
namespace bench = ddp::bench;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

struct Control {
  std::atomic<bool> measuring{false};
  std::atomic<bool> stop{false};
  std::atomic<int> ready{0};
  std::atomic<int> failed{0};
};

// Latencies and op counts of the sessions of one thread.
struct Stats {
  std::vector<float> latencies_us;
  std::uint64_t total = 0;
};

// Common part of the sessions: the optional handshake, the start signal, timing of one op.
class Session : public bench::LoadSession {
 public:
  Session(asio::io_context& io, Control& control, Stats& stats, bool handshake)
      : LoadSession(io), control_(control), stats_(stats), handshake_(handshake) {}

  // After connecting: handshake (if any), then report ready.
  void prepare() {
    if (!handshake_) {
      ++control_.ready;
      return;
    }
    bench::append_handshake(hello_, 0x5EED);
    in_handshake_ = true;
    exchange(hello_, bench::ReplyShape::fixed(4));
  }
  virtual void start() = 0;

 protected:
  void on_reply(std::int64_t value) final {
    if (in_handshake_) {
      in_handshake_ = false;
      if (value != 0x5EED) {
        std::fprintf(stderr, "store_load: PING echoed %lld, expected %d\n", static_cast<long long>(value), 0x5EED);
        ++control_.failed;
      }
      ++control_.ready;
      return;
    }
    step(value);
  }
  void on_failure(const boost::system::error_code& ec) final {
    if (!control_.stop.load()) {
      std::fprintf(stderr, "store_load: connection failed during the run: %s\n", ec.message().c_str());
      ++control_.failed;
    }
  }
  // The next step of the op in progress, given the reply to the previous one.
  virtual void step(std::int64_t value) = 0;

  void begin_op() { start_ = Clock::now(); }
  // Records the op; returns false when the run is over and no new op should begin.
  bool end_op() {
    ++stats_.total;
    if (control_.measuring.load(std::memory_order_relaxed)) {
      stats_.latencies_us.push_back(std::chrono::duration<float, std::micro>(Clock::now() - start_).count());
    }
    return !control_.stop.load(std::memory_order_relaxed);
  }

 private:
  Control& control_;
  Stats& stats_;
  bool handshake_;
  bool in_handshake_ = false;
  std::string hello_;
  Clock::time_point start_;
};

// set / get / add / check over 64 keys of its own and one shared counter; requests precomputed.
class MixSession final : public Session {
 public:
  MixSession(asio::io_context& io, Control& c, Stats& s, int id) : Session(io, c, s, true) {
    for (int k = 0; k < kSlots; ++k) {
      const std::string key = "/t" + std::to_string(id) + "/" + std::to_string(k);
      bench::append_set(set_[k], key, "value-" + std::to_string(k));
      bench::append_wait(wait_[k], key);
      bench::append_get(get_[k], key);
      bench::append_check(check_[k], key);
    }
    bench::append_add(add_, "/counter", 1);
  }
  void start() override { issue(); }

 private:
  static constexpr int kSlots = 64;
  void issue() {
    begin_op();
    sub_ = 0;
    const int slot = static_cast<int>(i_ % kSlots);
    switch (i_ % 4) {
      case 0:
        return exchange(set_[slot], bench::ReplyShape::none());
      case 1:  // get = WAIT, then GET, of the key set by the previous op
        return exchange(wait_[(i_ - 1) % kSlots], bench::ReplyShape::fixed(1));
      case 2:
        return exchange(add_, bench::ReplyShape::fixed(8));
      default:
        return exchange(check_[slot], bench::ReplyShape::fixed(1));
    }
  }
  void step(std::int64_t) override {
    if (i_ % 4 == 1 && sub_++ == 0) return exchange(get_[(i_ - 1) % kSlots], bench::ReplyShape::string());
    ++i_;
    if (end_op()) issue();
  }

  std::string set_[kSlots], wait_[kSlots], get_[kSlots], check_[kSlots], add_;
  long i_ = 0;
  int sub_ = 0;
};

// D ADDs on a counter of its own in one write, then their D 8-byte replies.
class PipelinedSession final : public Session {
 public:
  PipelinedSession(asio::io_context& io, Control& c, Stats& s, int id, int depth)
      : Session(io, c, s, true), depth_(depth) {
    for (int k = 0; k < depth; ++k) bench::append_add(batch_, "/counter/" + std::to_string(id), 1);
  }
  void start() override { issue(); }

 private:
  void issue() {
    begin_op();
    exchange(batch_, bench::ReplyShape::fixed(8 * static_cast<std::size_t>(depth_)));
  }
  void step(std::int64_t) override {
    bool more = true;
    for (int k = 0; k < depth_; ++k) more = end_op();
    if (more) issue();
  }

  int depth_;
  std::string batch_;
};

// Ping side: SET /pp/<pair>/<i>, then WAIT /pp/<pair>/<i>/a. Pong side: WAIT for the ping key,
// then SET the answer key. Fresh keys each round, so no round can see an old answer. To keep the
// store small however long the run, every kSweep rounds the pong side deletes the keys the pair
// no longer needs in one pipelined batch (housekeeping: it delays one ping in kSweep).
class PingPongSession final : public Session {
 public:
  PingPongSession(asio::io_context& io, Control& c, Stats& s, int id)
      : Session(io, c, s, true), ping_(id % 2 == 0), prefix_("/pp/" + std::to_string(id / 2) + "/") {}
  void start() override { issue(); }

 private:
  static constexpr long kSweep = 256;
  void issue() {
    const std::string key = prefix_ + std::to_string(i_);
    first_.clear();
    second_.clear();
    sub_ = 0;
    if (ping_) {
      begin_op();
      bench::append_set(first_, key, "x");
      bench::append_wait(second_, key + "/a");
      exchange(first_, bench::ReplyShape::none());
    } else {
      bench::append_wait(first_, key);
      bench::append_set(second_, key + "/a", "y");
      exchange(first_, bench::ReplyShape::fixed(1));
    }
  }
  void step(std::int64_t) override {
    ++sub_;
    if (ping_) {
      if (sub_ == 1) return exchange(second_, bench::ReplyShape::fixed(1));
      ++i_;
      if (end_op()) issue();
      return;
    }
    if (sub_ == 1) return exchange(second_, bench::ReplyShape::none());
    if (sub_ == 2 && (i_ + 1) % kSweep == 0) {
      // The ping side has seen every answer before this round's (it sent this round's key
      // after reading them); this round's answer it may not have read yet, so it stays.
      sweep_.clear();
      for (long j = i_ + 1 - kSweep; j <= i_; ++j) {
        bench::append_delete(sweep_, prefix_ + std::to_string(j));
        bench::append_delete(sweep_, prefix_ + std::to_string(j - 1) + "/a");
      }
      return exchange(sweep_, bench::ReplyShape::fixed(8 * 2 * kSweep));
    }
    ++i_;
    issue();
  }

  bool ping_;
  std::string prefix_, first_, second_, sweep_;
  long i_ = 0;
  int sub_ = 0;
};

// Floor: Q bytes out, R bytes back (echo); or B bytes relayed to the partner and back (relay).
class FloorSession final : public Session {
 public:
  FloorSession(asio::io_context& io, Control& c, Stats& s, int id, bool relay, std::size_t out, std::size_t back)
      : Session(io, c, s, false), ping_(!relay || id % 2 == 0), out_(out, 'x'), back_(back) {}
  void start() override { issue(); }

 private:
  void issue() {
    sub_ = 0;
    if (ping_) {
      begin_op();
      exchange(out_, bench::ReplyShape::fixed(back_));
    } else {
      exchange({}, bench::ReplyShape::fixed(back_));  // pong: wait for the ping first
    }
  }
  void step(std::int64_t) override {
    if (!ping_ && sub_++ == 0) return exchange(out_, bench::ReplyShape::none());
    if (!ping_ || end_op()) issue();
  }

  bool ping_;
  std::string out_;
  std::size_t back_;
  int sub_ = 0;
};

// Floor for pingpong: both sides write a SET and then a WAIT (two writes, as a PyTorch client
// sends them) and read a 1-byte reply; the pong side starts with its WAIT.
class FloorPingPongSession final : public Session {
 public:
  FloorPingPongSession(asio::io_context& io, Control& c, Stats& s, int id, std::size_t bytes)
      : Session(io, c, s, false), ping_(id % 2 == 0), message_(bytes, 'x') {}
  void start() override {
    if (ping_) return issue();
    exchange(message_, bench::ReplyShape::fixed(1));  // pong: its first WAIT
  }

 private:
  void issue() {
    if (ping_) begin_op();
    set_sent_ = true;
    exchange(message_, bench::ReplyShape::none());  // the SET
  }
  void step(std::int64_t) override {
    if (std::exchange(set_sent_, false)) return exchange(message_, bench::ReplyShape::fixed(1));  // the WAIT
    if (!ping_ || end_op()) issue();
  }

  bool ping_;
  bool set_sent_ = false;
  std::string message_;
};

int serve_floor(int argc, char** argv) {
  bench::FloorServerOptions options;
  const std::string kind = argc > 2 ? argv[2] : "";
  options.relay = kind == "relay" || kind == "pingpong";
  if (kind == "pingpong") {
    if (argc < 4) {
      std::fprintf(stderr, "usage: store_load serve-floor pingpong MESSAGE_BYTES\n");
      return 2;
    }
    options.message_bytes = static_cast<std::size_t>(std::max(1, std::atoi(argv[3])));
  }
  if (!options.relay) {
    if (argc < 5) {
      std::fprintf(stderr, "usage: store_load serve-floor echo REQUEST_BYTES REPLY_BYTES | relay\n");
      return 2;
    }
    options.request_bytes = std::max(1, std::atoi(argv[3]));
    options.reply_bytes = static_cast<std::size_t>(std::max(0, std::atoi(argv[4])));
  }
  asio::io_context io(1);
  bench::FloorServer server(io, options);
  std::printf("port=%u\n", server.port());
  std::fflush(stdout);
  // Serve until the parent closes our stdin (no event source for that in this loop: a thread
  // blocks on the read instead).
  std::thread watcher([&io] {
    while (std::cin.get() != EOF) {
    }
    io.stop();
  });
  io.run();
  watcher.join();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "serve-floor") return serve_floor(argc, argv);
  if (argc < 7 || std::string(argv[1]) != "run") {
    std::fprintf(stderr,
                 "usage: store_load run HOST PORT CONNS SECONDS mix|pingpong|pipelined:D|floor-echo:Q:R|floor-relay:B|"
                 "floor-pingpong:M "
                 "[THREADS]\n"
                 "       store_load serve-floor echo Q R | relay | pingpong M\n");
    return 2;
  }
  boost::system::error_code host_ec;
  const tcp::endpoint endpoint(asio::ip::make_address(argv[2], host_ec),
                               static_cast<std::uint16_t>(std::atoi(argv[3])));
  if (host_ec) {
    std::fprintf(stderr, "store_load: HOST must be an IP address, not '%s'\n", argv[2]);
    return 2;
  }
  int conns = std::max(1, std::atoi(argv[4]));
  const auto duration = std::chrono::duration<double>(std::atof(argv[5]));
  const std::string mode = argv[6];
  const int threads = argc > 7 ? std::max(1, std::atoi(argv[7])) : 1;
  const bool floor_relay = mode.rfind("floor-relay:", 0) == 0;
  const bool floor_pingpong = mode.rfind("floor-pingpong:", 0) == 0;
  const bool floor_echo = mode.rfind("floor-echo:", 0) == 0;
  const int depth = mode.rfind("pipelined:", 0) == 0 ? std::max(1, std::atoi(mode.c_str() + 10)) : 0;
  if (!floor_relay && !floor_pingpong && !floor_echo && depth == 0 && mode != "mix" && mode != "pingpong") {
    std::fprintf(stderr, "store_load: unknown mode '%s'\n", mode.c_str());
    return 2;
  }
  const bool paired = mode == "pingpong" || floor_relay || floor_pingpong;
  if (paired && conns % 2 == 1) ++conns;
  std::size_t out_bytes = 0, back_bytes = 0;
  if (floor_relay) out_bytes = back_bytes = std::stoul(mode.substr(12));
  if (floor_pingpong) out_bytes = std::stoul(mode.substr(15));
  if (floor_echo) {
    const auto colon = mode.find(':', 11);
    out_bytes = std::stoul(mode.substr(11, colon - 11));
    back_bytes = std::stoul(mode.substr(colon + 1));
  }

  Control control;
  std::vector<std::unique_ptr<asio::io_context>> loops;
  std::vector<Stats> stats(static_cast<std::size_t>(threads));
  for (int t = 0; t < threads; ++t) loops.push_back(std::make_unique<asio::io_context>(1));
  std::vector<std::unique_ptr<Session>> sessions;
  // Connect one by one from this thread before any loop runs, so the server accepts in our order
  // (the relay floor pairs connections in accept order). Both ends of a pair share a thread.
  for (int i = 0; i < conns; ++i) {
    const auto t = static_cast<std::size_t>((paired ? i / 2 : i) % threads);
    auto& io = *loops[t];
    if (mode == "mix") {
      sessions.push_back(std::make_unique<MixSession>(io, control, stats[t], i));
    } else if (depth > 0) {
      sessions.push_back(std::make_unique<PipelinedSession>(io, control, stats[t], i, depth));
    } else if (mode == "pingpong") {
      sessions.push_back(std::make_unique<PingPongSession>(io, control, stats[t], i));
    } else if (floor_pingpong) {
      sessions.push_back(std::make_unique<FloorPingPongSession>(io, control, stats[t], i, out_bytes));
    } else {
      sessions.push_back(std::make_unique<FloorSession>(io, control, stats[t], i, floor_relay, out_bytes, back_bytes));
    }
    try {
      sessions.back()->socket().connect(endpoint);
      sessions.back()->connected();
    } catch (const boost::system::system_error& e) {
      std::fprintf(stderr, "store_load: connection %d to %s:%u failed: %s\n", i, argv[2], endpoint.port(), e.what());
      return 1;
    }
  }
  for (std::size_t i = 0; i < sessions.size(); ++i) {
    const auto t = static_cast<std::size_t>((paired ? i / 2 : i) % static_cast<std::size_t>(threads));
    asio::post(*loops[t], [s = sessions[i].get()] { s->prepare(); });
  }
  std::vector<std::thread> workers;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards;
  for (auto& io : loops) {
    guards.push_back(asio::make_work_guard(*io));
    workers.emplace_back([&io] { io->run(); });
  }
  // Wait for every handshake; there is no event to wait on across the loops, so poll briefly.
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (control.ready.load() < conns && control.failed.load() == 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  int rc = 0;
  double secs = 0;
  if (control.ready.load() < conns || control.failed.load() != 0) {
    std::fprintf(stderr, "store_load: only %d of %d connections completed the handshake\n", control.ready.load(),
                 conns);
    rc = 1;
  } else {
    for (std::size_t i = 0; i < sessions.size(); ++i) {
      const auto t = static_cast<std::size_t>((paired ? i / 2 : i) % static_cast<std::size_t>(threads));
      asio::post(*loops[t], [s = sessions[i].get()] { s->start(); });
    }
    std::this_thread::sleep_for(std::min(duration / 2, std::chrono::duration<double>(0.2)));  // warm-up
    control.measuring = true;
    const auto t0 = Clock::now();
    std::this_thread::sleep_for(duration);  // the measurement window
    control.measuring = false;
    secs = std::chrono::duration<double>(Clock::now() - t0).count();
    control.stop = true;
    // Let ops in flight finish; pong sides stay parked in a WAIT that no ping will satisfy.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (control.failed.load() != 0) rc = 1;
  }
  control.stop = true;
  for (auto& io : loops) io->stop();
  for (auto& w : workers) w.join();
  sessions.clear();  // close the sockets while their loops still exist
  if (rc != 0) return rc;

  std::vector<float> all;
  std::uint64_t total = 0;
  for (auto& s : stats) {
    all.insert(all.end(), s.latencies_us.begin(), s.latencies_us.end());
    total += s.total;
  }
  std::sort(all.begin(), all.end());
  const auto pct = [&](double p) { return all.empty() ? 0.0 : all[static_cast<std::size_t>(p * (all.size() - 1))]; };
  std::printf("{\"ops\": %zu, \"ops_per_s\": %.1f, \"p50_us\": %.1f, \"p99_us\": %.1f, \"ops_total\": %llu}\n",
              all.size(), static_cast<double>(all.size()) / secs, pct(0.50), pct(0.99),
              static_cast<unsigned long long>(total));
  return 0;
}
