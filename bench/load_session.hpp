// One client connection of the benchmark load generators (store_load, rendezvous_scale), driven
// by an Asio event loop: send a request, read exactly one reply of a known shape, hand it to the
// subclass, which sends the next request. Many sessions share one loop thread, so one or two
// threads drive hundreds or tens of thousands of connections.
//
// Like a real PyTorch client, a session has at most one request in flight (no pipelining).
// Sends go straight to the non-blocking socket (one write() syscall when the kernel takes it
// all, as it does for these small messages); reads wait for the event loop.
//
// Not thread-safe: a session lives on the one thread that runs its io_context.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

namespace ddp::bench {

// What the reply to a request looks like on the wire.
struct ReplyShape {
  enum class Kind { None, Fixed, String, Strings };
  Kind kind = Kind::None;
  std::size_t bytes = 0;  // Fixed: the width (1, 4 or 8 for the store; anything for the floor); Strings: the count

  static ReplyShape none() { return {Kind::None, 0}; }
  static ReplyShape fixed(std::size_t n) { return {Kind::Fixed, n}; }
  static ReplyShape string() { return {Kind::String, 0}; }  // u64 length + bytes
  static ReplyShape strings(std::size_t n) { return {Kind::Strings, n}; }  // n of them (MULTI_GET)
};

class LoadSession {
 public:
  explicit LoadSession(boost::asio::io_context& io) : socket_(io) {}
  virtual ~LoadSession() = default;
  LoadSession(const LoadSession&) = delete;
  LoadSession& operator=(const LoadSession&) = delete;

  boost::asio::ip::tcp::socket& socket() { return socket_; }
  // Call once connected: sets TCP_NODELAY (as c10d's client does) and non-blocking mode.
  void connected();

 protected:
  // Sends `bytes` (which must stay valid until the reply arrives), then reads one reply of
  // `shape` and calls on_reply with its value: the integer (little-endian) for a fixed-width
  // reply of at most 8 bytes, the length for a string, the total length for strings, 0 otherwise. A None reply completes as
  // soon as the bytes are handed to the kernel.
  void exchange(std::string_view bytes, ReplyShape shape);
  virtual void on_reply(std::int64_t value) = 0;
  // A failed send or read (the server closed, the run was stopped). The session is done.
  virtual void on_failure(const boost::system::error_code& ec) = 0;

  boost::asio::ip::tcp::socket socket_;

 private:
  void read_reply();
  // The length of a complete reply at the front of the input, or 0 while incomplete.
  std::size_t complete_reply();

  ReplyShape shape_;
  std::vector<char> in_ = std::vector<char>(512);
  std::size_t have_ = 0;
  // String replies: how many strings, and bytes, at the front of the input are known complete.
  std::size_t scanned_strings_ = 0;
  std::size_t scanned_bytes_ = 0;
};

// Request encoders appending to `out` (rendezvous::encode_request of one-key requests).
void append_set(std::string& out, std::string_view key, std::string_view value);
void append_get(std::string& out, std::string_view key);
void append_add(std::string& out, std::string_view key, std::int64_t delta);
void append_check(std::string& out, std::string_view key);  // CHECK of one key
void append_wait(std::string& out, std::string_view key);   // WAIT for one key
void append_delete(std::string& out, std::string_view key);
void append_multi_get(std::string& out, const std::vector<std::string>& keys);
// VALIDATE with the magic followed by PING with `nonce`; the server echoes the 4 nonce bytes.
void append_handshake(std::string& out, std::uint32_t nonce);

}  // namespace ddp::bench
