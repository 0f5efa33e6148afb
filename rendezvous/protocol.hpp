// Constants of PyTorch's c10d TCPStore wire protocol (2.x numbering, VALIDATE handshake).
//
// The protocol, as spoken by PyTorch 2.6 … 2.15 clients and servers:
//   1. The client opens one TCP connection and sends VALIDATE (type 0 + u32 magic, no reply).
//   2. It sends PING (type 13 + u32 nonce); the server echoes the 4 nonce bytes.
//   3. Every later request is one type byte followed by its fields; strings and byte vectors are a
//      u64 length plus raw bytes, integers are raw little-endian (host order on x86-64/aarch64).
//   4. Requests on one connection are answered strictly in order; the only reply that may come
//      much later is the single STOP_WAITING byte of a WAIT or BARRIER. While it is pending the
//      client may send CANCEL_WAIT, which is always answered with WAIT_CANCELED.
// Field layouts per query are in request.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ddp::rendezvous {

enum class QueryType : std::uint8_t {
  Validate = 0,
  Set = 1,
  CompareSet = 2,
  Get = 3,
  Add = 4,
  Check = 5,
  Wait = 6,
  GetNumKeys = 7,
  DeleteKey = 8,
  Append = 9,
  MultiGet = 10,
  MultiSet = 11,
  CancelWait = 12,
  Ping = 13,
  QueuePush = 14,
  QueuePop = 15,
  QueueLen = 16,
  ListKeys = 17,
  Barrier = 18,
};
inline constexpr std::uint8_t kQueryTypeCount = 19;

enum class CheckResponse : std::uint8_t { Ready = 0, NotReady = 1 };
enum class WaitResponse : std::uint8_t { StopWaiting = 0, WaitCanceled = 1 };

inline constexpr std::uint32_t kValidationMagic = 0x3C85F7CE;

// ddplaunch's one extension: a store that refuses a peer's address (TcpStoreServer::allow_only)
// answers the PING with this value in place of the nonce, then closes, so that our client can
// say why instead of retrying. A PyTorch client sees a wrong echo, or a closed connection.
inline constexpr std::uint32_t kRefusedAddressEcho = 0xDD7EF05E;

// Limits checked before anything is allocated (the same as PyTorch's libuv server).
inline constexpr std::size_t kMaxKeyLength = 8 * 1024;
inline constexpr std::size_t kMaxValueLength = 8 * 1024 * 1024;
inline constexpr std::size_t kMaxKeyCount = 128 * 1024;
// All keys and values of one request together (a MULTI_SET, a MULTI_GET's keys): 64 MiB, eight
// maximal values. PyTorch's servers have no such total; its clients send far less (a MULTI_SET
// of a rendezvous round is kilobytes), and without it one request could be 1 TiB.
inline constexpr std::size_t kMaxRequestBytes = 64 * 1024 * 1024;
// APPEND refuses to grow a value past kMaxValueLength (the connection is closed with the reason).

// Name of a query type for log lines ("SET", "WAIT", …); "UNKNOWN(n)" is not produced here,
// callers check is_known_query_type first.
std::string_view query_name(QueryType type);
bool is_known_query_type(std::uint8_t byte);

}  // namespace ddp::rendezvous
