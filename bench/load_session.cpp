// The load generators' connection; see load_session.hpp.
#include "bench/load_session.hpp"

#include <cstring>

#include <boost/asio/write.hpp>

#include "rendezvous/protocol.hpp"
#include "rendezvous/request.hpp"

namespace ddp::bench {

namespace asio = boost::asio;
namespace rdzv = ddp::rendezvous;

void LoadSession::connected() {
  socket_.set_option(asio::ip::tcp::no_delay(true));
  socket_.non_blocking(true);
}

void LoadSession::exchange(std::string_view bytes, ReplyShape shape) {
  shape_ = shape;
  // Write directly: the message is small and the socket buffer almost always has room, so this
  // is one syscall and no trip through the event loop. Only a short write waits for the loop.
  boost::system::error_code ec;
  const std::size_t n = socket_.write_some(asio::buffer(bytes.data(), bytes.size()), ec);
  if (ec && ec != asio::error::would_block) return on_failure(ec);
  const std::size_t sent = ec ? 0 : n;
  if (sent < bytes.size()) {
    asio::async_write(socket_, asio::buffer(bytes.data() + sent, bytes.size() - sent),
                      [this](const boost::system::error_code& wec, std::size_t) {
                        if (wec) return on_failure(wec);
                        if (shape_.kind == ReplyShape::Kind::None) return on_reply(0);
                        read_reply();
                      });
    return;
  }
  if (shape_.kind == ReplyShape::Kind::None) return on_reply(0);
  read_reply();
}

std::size_t LoadSession::complete_reply() {
  if (shape_.kind == ReplyShape::Kind::Fixed) return have_ >= shape_.bytes ? shape_.bytes : 0;
  // Strings already known complete are skipped: a long MULTI_GET reply arrives in many reads.
  const std::size_t count = shape_.kind == ReplyShape::Kind::Strings ? shape_.bytes : 1;
  for (; scanned_strings_ < count; ++scanned_strings_) {
    if (have_ < scanned_bytes_ + 8) return 0;
    const auto end = scanned_bytes_ + 8 + static_cast<std::size_t>(rdzv::get_i64(in_.data() + scanned_bytes_));
    if (have_ < end) return 0;
    scanned_bytes_ = end;
  }
  return scanned_bytes_;
}

void LoadSession::read_reply() {
  if (const std::size_t used = complete_reply()) {
    std::int64_t value = 0;
    if (shape_.kind == ReplyShape::Kind::String) {
      value = rdzv::get_i64(in_.data());
    } else if (shape_.kind == ReplyShape::Kind::Strings) {
      value = static_cast<std::int64_t>(used);
    } else {
      for (std::size_t i = std::min<std::size_t>(used, 8); i-- > 0;) {
        value = (value << 8) | static_cast<unsigned char>(in_[i]);
      }
    }
    // Without pipelining nothing follows the reply; keep whatever does for the next one.
    std::memmove(in_.data(), in_.data() + used, have_ - used);
    have_ -= used;
    scanned_strings_ = scanned_bytes_ = 0;
    return on_reply(value);
  }
  if (have_ == in_.size()) in_.resize(in_.size() * 2);  // a long string reply
  socket_.async_read_some(asio::buffer(in_.data() + have_, in_.size() - have_),
                          [this](const boost::system::error_code& ec, std::size_t n) {
                            if (ec) return on_failure(ec);
                            have_ += n;
                            read_reply();
                          });
}

void append_set(std::string& out, std::string_view key, std::string_view value) {
  out += rdzv::encode_request({rdzv::QueryType::Set, {std::string(key)}, {std::string(value)}});
}

void append_get(std::string& out, std::string_view key) {
  out += rdzv::encode_request({rdzv::QueryType::Get, {std::string(key)}, {}, 0});
}

void append_add(std::string& out, std::string_view key, std::int64_t delta) {
  out += rdzv::encode_request({rdzv::QueryType::Add, {std::string(key)}, {}, delta});
}

void append_check(std::string& out, std::string_view key) {
  out += rdzv::encode_request({rdzv::QueryType::Check, {std::string(key)}, {}, 0});
}

void append_wait(std::string& out, std::string_view key) {
  out += rdzv::encode_request({rdzv::QueryType::Wait, {std::string(key)}, {}, 0});
}

void append_delete(std::string& out, std::string_view key) {
  out += rdzv::encode_request({rdzv::QueryType::DeleteKey, {std::string(key)}, {}, 0});
}

void append_multi_get(std::string& out, const std::vector<std::string>& keys) {
  out += rdzv::encode_request({rdzv::QueryType::MultiGet, keys, {}, 0});
}

void append_handshake(std::string& out, std::uint32_t nonce) {
  out += rdzv::encode_request({rdzv::QueryType::Validate, {}, {}, rdzv::kValidationMagic});
  out += rdzv::encode_request({rdzv::QueryType::Ping, {}, {}, nonce});
}

}  // namespace ddp::bench
