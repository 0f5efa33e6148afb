// Incremental parser for TCPStore requests: bytes go in as they arrive from the socket (one byte
// at a time is fine), whole Request values come out.
//
// Every length and count is checked against the limits in protocol.hpp before anything is
// allocated for it (each field, and all of one request's keys and values together against
// kMaxRequestBytes), so a peer announcing a 1 TiB key costs nothing but a closed connection.
// A partial request costs memory; buffered_bytes() says how much, for the store's budget.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/request.hpp"

namespace ddp::rendezvous {

class RequestParser {
 public:
  // Consumes bytes from the front of `input` (advancing it) until one request is complete or the
  // input is used up. Returns true when `out` holds a complete request; the parser then starts
  // afresh and the rest of `input` is left for the next call. Returns false when more bytes are
  // needed (all of `input` was consumed and kept).
  // Pass the same `out` every time: the parser hands its vectors back and forth with it instead
  // of allocating new ones per request; whatever `out` held before a complete request is dropped.
  // Throws ProtocolError for an unknown query type or a field over its limit; after that the
  // parser must not be used again (the connection is to be closed). Not thread-safe.
  bool parse(std::string_view& input, Request& out);

  // True when no partial request is buffered.
  bool idle() const { return !have_type_; }
  // Memory the partial request holds: its complete fields, the field being filled (its
  // capacity: a string never reserves more than its announced length) and a fixed cost per
  // field. 0 when idle. O(1).
  std::size_t buffered_bytes() const;
  // Name of the partial request's type ("MULTI_SET"), "" when idle; for log lines.
  std::string_view query() const { return have_type_ ? query_name(req_.type) : std::string_view(); }

 private:
  enum class Field { U32, I64, Count, Key, Value, Done };
  Field next_field() const;
  // Feeds bytes into a fixed-width field; returns true once all `width` bytes are in scratch_.
  bool fill_fixed(std::string_view& input, std::size_t width);
  // The field's `width` bytes, from `input` itself when they are all there (consumed), else
  // through fill_fixed; nullptr while incomplete.
  const char* fixed_field(std::string_view& input, std::size_t width);
  void finish_string(Field field);
  // Empties a field vector handed back by the caller, keeping a small capacity.
  static void release(std::vector<std::string>& fields);
  static constexpr std::size_t kKeptFields = 16;

  bool have_type_ = false;
  Request req_;
  std::size_t held_ = 0;         // complete fields of req_, as buffered_bytes() counts them
  std::uint64_t announced_ = 0;  // lengths of req_'s strings so far, against kMaxRequestBytes
  bool have_integer_ = false;
  bool have_count_ = false;
  std::uint64_t count_ = 0;
  // Fixed-width bytes collected so far (u32, i64, or a string's length prefix).
  char scratch_[8] = {};
  std::size_t scratch_len_ = 0;
  // A string field whose length is known and whose bytes are arriving.
  bool in_string_ = false;
  std::uint64_t string_left_ = 0;
  std::string string_;
};

}  // namespace ddp::rendezvous
