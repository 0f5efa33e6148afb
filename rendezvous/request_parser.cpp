// Incremental request parsing. The next field to read is derived from what the request already
// holds (see next_field), so the only state kept between calls is the partial field itself.
#include "rendezvous/request_parser.hpp"

#include <algorithm>

#include "ddplaunch/rendezvous/error.hpp"

namespace ddp::rendezvous {

RequestParser::Field RequestParser::next_field() const {
  const std::size_t nk = req_.keys.size();
  const std::size_t nv = req_.values.size();
  switch (req_.type) {
    case QueryType::Validate:
    case QueryType::Ping:
      return have_integer_ ? Field::Done : Field::U32;
    case QueryType::Set:
    case QueryType::Append:
    case QueryType::QueuePush:
      return nk < 1 ? Field::Key : nv < 1 ? Field::Value : Field::Done;
    case QueryType::CompareSet:
      return nk < 1 ? Field::Key : nv < 2 ? Field::Value : Field::Done;
    case QueryType::Get:
    case QueryType::DeleteKey:
    case QueryType::QueuePop:
    case QueryType::QueueLen:
      return nk < 1 ? Field::Key : Field::Done;
    case QueryType::Add:
    case QueryType::Barrier:
      return nk < 1 ? Field::Key : have_integer_ ? Field::Done : Field::I64;
    case QueryType::Check:
    case QueryType::Wait:
    case QueryType::MultiGet:
      if (!have_count_) return Field::Count;
      return nk < count_ ? Field::Key : Field::Done;
    case QueryType::MultiSet:
      if (!have_count_) return Field::Count;
      if (nv < nk) return Field::Value;
      return nk < count_ ? Field::Key : Field::Done;
    case QueryType::GetNumKeys:
    case QueryType::CancelWait:
    case QueryType::ListKeys:
      return Field::Done;
  }
  return Field::Done;
}

const char* RequestParser::fixed_field(std::string_view& input, std::size_t width) {
  if (scratch_len_ == 0 && input.size() >= width) {
    // The common case: the whole field is in this read, so it is decoded where it lies.
    const char* p = input.data();
    input.remove_prefix(width);
    return p;
  }
  return fill_fixed(input, width) ? scratch_ : nullptr;
}

bool RequestParser::fill_fixed(std::string_view& input, std::size_t width) {
  const std::size_t take = std::min(width - scratch_len_, input.size());
  std::copy_n(input.data(), take, scratch_ + scratch_len_);
  scratch_len_ += take;
  input.remove_prefix(take);
  if (scratch_len_ < width) return false;
  scratch_len_ = 0;
  return true;
}

namespace {
// What a std::string in a vector costs beyond its characters (its header, allocator rounding).
constexpr std::size_t kFieldOverhead = 48;
}  // namespace

std::size_t RequestParser::buffered_bytes() const {
  if (!have_type_) return 0;
  return held_ + (in_string_ ? string_.capacity() + kFieldOverhead : 0);
}

void RequestParser::finish_string(Field field) {
  in_string_ = false;
  held_ += string_.capacity() + kFieldOverhead;
  (field == Field::Key ? req_.keys : req_.values).push_back(std::move(string_));
  string_.clear();
}

bool RequestParser::parse(std::string_view& input, Request& out) {
  if (!have_type_) {
    if (input.empty()) return false;
    const auto byte = static_cast<std::uint8_t>(input.front());
    if (!is_known_query_type(byte)) {
      throw ProtocolError("unknown query type " + std::to_string(byte));
    }
    input.remove_prefix(1);
    req_.integer = 0;  // keys and values were emptied when the last request was handed out
    req_.type = static_cast<QueryType>(byte);
    have_type_ = true;
    have_integer_ = have_count_ = false;
    held_ = 0;
    announced_ = 0;
  }
  for (Field field = next_field(); field != Field::Done; field = next_field()) {
    switch (field) {
      case Field::U32: {
        const char* p = fixed_field(input, 4);
        if (p == nullptr) return false;
        req_.integer = get_u32(p);
        have_integer_ = true;
        break;
      }
      case Field::I64: {
        const char* p = fixed_field(input, 8);
        if (p == nullptr) return false;
        req_.integer = get_i64(p);
        have_integer_ = true;
        break;
      }
      case Field::Count: {
        const char* p = fixed_field(input, 8);
        if (p == nullptr) return false;
        count_ = static_cast<std::uint64_t>(get_i64(p));
        if (count_ > kMaxKeyCount) {
          throw ProtocolError(std::string(query_name(req_.type)) + " announces " + std::to_string(count_) +
                              " keys, over the limit of " + std::to_string(kMaxKeyCount));
        }
        have_count_ = true;
        break;
      }
      case Field::Key:
      case Field::Value: {
        if (!in_string_) {
          const char* p = fixed_field(input, 8);
          if (p == nullptr) return false;
          const auto len = static_cast<std::uint64_t>(get_i64(p));
          const std::size_t limit = field == Field::Key ? kMaxKeyLength : kMaxValueLength;
          if (len > limit) {
            throw ProtocolError(std::string(query_name(req_.type)) + " announces a " +
                                (field == Field::Key ? "key" : "value") + " of " + std::to_string(len) +
                                " bytes, over the limit of " + std::to_string(limit));
          }
          if (len > kMaxRequestBytes - announced_) {
            throw ProtocolError(std::string(query_name(req_.type)) + " announces more than " +
                                std::to_string(kMaxRequestBytes) + " bytes of keys and values (" +
                                std::to_string(announced_) + " so far, then " + std::to_string(len) +
                                "), over the limit per request");
          }
          announced_ += len;
          if (len <= input.size()) {
            // The whole string is in this read: straight into the request, no staging copy.
            auto& fields = field == Field::Key ? req_.keys : req_.values;
            fields.emplace_back(input.data(), static_cast<std::size_t>(len));
            held_ += fields.back().capacity() + kFieldOverhead;
            input.remove_prefix(static_cast<std::size_t>(len));
            break;
          }
          in_string_ = true;
          string_left_ = len;
          // Reserve at most 64 KiB up front: a peer that announces 8 MiB and sends nothing
          // should not cost 8 MiB; larger values grow as their bytes arrive.
          string_.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(len, 64 * 1024)));
        }
        const std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(string_left_, input.size()));
        if (string_.size() + take > string_.capacity()) {
          // Grow geometrically but never past the announced length, so the capacity that
          // buffered_bytes() counts stays within what the peer has announced.
          const std::size_t total = string_.size() + static_cast<std::size_t>(string_left_);
          string_.reserve(std::min(total, std::max(2 * string_.capacity(), string_.size() + take)));
        }
        string_.append(input.data(), take);
        input.remove_prefix(take);
        string_left_ -= take;
        if (string_left_ > 0) return false;
        finish_string(field);
        break;
      }
      case Field::Done:
        break;
    }
  }
  have_type_ = false;
  // Swapped, not moved: the caller's vectors come back empty with their capacity, so a
  // connection that reuses one Request parses its requests without allocating (short keys and
  // values fit in the strings themselves). What the caller left in them is freed here.
  out.keys.swap(req_.keys);  // member by member: std::swap of Requests is three moves of each vector
  out.values.swap(req_.values);
  out.type = req_.type;
  out.integer = req_.integer;
  release(req_.keys);
  release(req_.values);
  return true;
}

void RequestParser::release(std::vector<std::string>& fields) {
  fields.clear();
  // A MULTI_GET of many keys leaves a large vector: not kept for the next request.
  if (fields.capacity() > kKeptFields) std::vector<std::string>().swap(fields);
}

}  // namespace ddp::rendezvous
