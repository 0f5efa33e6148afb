// Encoding of requests and the little-endian primitives (see request.hpp for the layouts).
#include "rendezvous/request.hpp"

#include <bit>
#include <cstring>

#include "ddplaunch/rendezvous/error.hpp"

namespace ddp::rendezvous {

void put_u8(std::string& out, std::uint8_t v) {
  out.push_back(static_cast<char>(v));
}

void put_u32(std::string& out, std::uint32_t v) {
  char b[4];
  for (int i = 0; i < 4; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
  out.append(b, 4);
}

void put_i64(std::string& out, std::int64_t v) {
  const auto u = static_cast<std::uint64_t>(v);
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>((u >> (8 * i)) & 0xFF);
  out.append(b, 8);
}

void put_str(std::string& out, std::string_view bytes) {
  put_i64(out, static_cast<std::int64_t>(bytes.size()));
  out.append(bytes);
}

std::uint32_t get_u32(const char* p) {
  std::uint32_t v = 0;
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(&v, p, 4);  // one load; the loop below is the portable form
    return v;
  }
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

std::int64_t get_i64(const char* p) {
  std::uint64_t v = 0;
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(&v, p, 8);
    return static_cast<std::int64_t>(v);
  }
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return static_cast<std::int64_t>(v);
}

std::string encode_request(const Request& r) {
  std::string out;
  put_u8(out, static_cast<std::uint8_t>(r.type));
  const auto key = [&](std::size_t i) -> const std::string& {
    DDP_ASSERT(i < r.keys.size(), "request is missing key " + std::to_string(i));
    return r.keys[i];
  };
  const auto value = [&](std::size_t i) -> const std::string& {
    DDP_ASSERT(i < r.values.size(), "request is missing value " + std::to_string(i));
    return r.values[i];
  };
  switch (r.type) {
    case QueryType::Validate:
    case QueryType::Ping:
      put_u32(out, static_cast<std::uint32_t>(r.integer));
      break;
    case QueryType::Set:
    case QueryType::Append:
    case QueryType::QueuePush:
      put_str(out, key(0));
      put_str(out, value(0));
      break;
    case QueryType::CompareSet:
      put_str(out, key(0));
      put_str(out, value(0));
      put_str(out, value(1));
      break;
    case QueryType::Get:
    case QueryType::DeleteKey:
    case QueryType::QueuePop:
    case QueryType::QueueLen:
      put_str(out, key(0));
      break;
    case QueryType::Add:
    case QueryType::Barrier:
      put_str(out, key(0));
      put_i64(out, r.integer);
      break;
    case QueryType::Check:
    case QueryType::Wait:
    case QueryType::MultiGet:
      put_i64(out, static_cast<std::int64_t>(r.keys.size()));
      for (const auto& k : r.keys) put_str(out, k);
      break;
    case QueryType::MultiSet:
      DDP_ASSERT(r.keys.size() == r.values.size(), "MULTI_SET needs one value per key");
      put_i64(out, static_cast<std::int64_t>(r.keys.size()));
      for (std::size_t i = 0; i < r.keys.size(); ++i) {
        put_str(out, r.keys[i]);
        put_str(out, r.values[i]);
      }
      break;
    case QueryType::GetNumKeys:
    case QueryType::CancelWait:
    case QueryType::ListKeys:
      break;
  }
  return out;
}

}  // namespace ddp::rendezvous
