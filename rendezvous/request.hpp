// One TCPStore request as a value, and its encoding on the wire.
//
// Field layout after the type byte (str = u64 length + bytes, integers little-endian):
//   VALIDATE   u32 magic                 PING        u32 nonce
//   SET        str key, str value        COMPARE_SET str key, str expected, str desired
//   GET        str key                   ADD         str key, i64 delta
//   CHECK      u64 n, n × str key        WAIT        u64 n, n × str key
//   GETNUMKEYS —                         DELETE_KEY  str key
//   APPEND     str key, str bytes        MULTI_GET   u64 n, n × str key
//   MULTI_SET  u64 n, n × (str key, str value)
//   CANCEL_WAIT —                        LIST_KEYS   —
//   QUEUE_PUSH str key, str value        QUEUE_POP   str key        QUEUE_LEN str key
//   BARRIER    str key, i64 world_size
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rendezvous/protocol.hpp"

namespace ddp::rendezvous {

struct Request {
  QueryType type = QueryType::Ping;
  // Keys in wire order: one for single-key queries, n for CHECK/WAIT/MULTI_GET/MULTI_SET.
  std::vector<std::string> keys;
  // SET/APPEND/QUEUE_PUSH: the value; COMPARE_SET: expected, desired; MULTI_SET: one per key.
  std::vector<std::string> values;
  // ADD delta, BARRIER world size, VALIDATE magic, PING nonce (the low 32 bits on the wire).
  std::int64_t integer = 0;

  bool operator==(const Request&) const = default;
};

// Bytes a client sends for `request`. Pure; never throws except std::bad_alloc.
std::string encode_request(const Request& request);

// Little-endian primitives shared by request and reply encoding. They append to `out`.
void put_u8(std::string& out, std::uint8_t v);
void put_u32(std::string& out, std::uint32_t v);
void put_i64(std::string& out, std::int64_t v);
void put_str(std::string& out, std::string_view bytes);

// The inverse of put_u32/put_i64 on exactly 4/8 bytes at `p`.
std::uint32_t get_u32(const char* p);
std::int64_t get_i64(const char* p);

}  // namespace ddp::rendezvous
