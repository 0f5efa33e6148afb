// See outcome.hpp.
#include "launcher/rdzv/outcome.hpp"

#include <charconv>
#include <string_view>

#include <fmt/format.h>

namespace ddp::launcher {
namespace {

constexpr std::string_view kMagic = "ddplaunch-outcome 2 ";
constexpr std::string_view kMagicV1 = "ddplaunch-outcome 1 ";  // before the record: still read

// The next space-separated integer of `header` at `pos`, in [lo, hi].
bool take_int(std::string_view header, std::size_t& pos, int lo, int hi, int& out) {
  const std::size_t end = std::min(header.find(' ', pos), header.size());
  const auto [ptr, ec] = std::from_chars(header.data() + pos, header.data() + end, out);
  if (ec != std::errc() || ptr != header.data() + end || out < lo || out > hi) return false;
  pos = end + 1;
  return true;
}

// The start of a value a stranger may have written, safe to print: at most 80 bytes, with
// control and non-ASCII bytes escaped so that none reaches the terminal.
std::string quoted(const std::string& value) {
  std::string out;
  for (const char ch : std::string_view(value).substr(0, 80)) {
    const auto b = static_cast<unsigned char>(ch);
    if (ch == '\n') {
      out += "\\n";
    } else if (b < 0x20 || b >= 0x7f || ch == '\\') {
      out += fmt::format("\\x{:02x}", b);
    } else {
      out += ch;
    }
  }
  return "'" + out + (value.size() > 80 ? "'..." : "'");
}

bool valid(Outcome::Kind kind, int code) {
  return kind == Outcome::Kind::Success ? code == 0 : code >= 1 && code <= 255;
}

// A success says nothing more: whatever follows its header was not written by encode().
bool valid(const Outcome& o) {
  return valid(o.kind, o.code) && (!o.succeeded() || o.summary.empty());
}

}  // namespace

std::string printable(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const auto b = static_cast<unsigned char>(ch);
    if ((b < 0x20 && ch != '\n' && ch != '\t') || b == 0x7f || ch == '\\') {
      out += fmt::format("\\x{:02x}", b);
    } else {
      out += ch;
    }
  }
  return out;
}

Outcome Outcome::success(int origin_node) {
  return Outcome{Kind::Success, 0, "", origin_node, std::nullopt};
}

Outcome Outcome::failure(int code, std::string summary, int origin_node, std::optional<RootCause> root) {
  return Outcome{Kind::Failure, code, std::move(summary), origin_node, std::move(root)};
}

std::string Outcome::encode() const {
  DDP_ASSERT(valid(*this),
             fmt::format("outcome code {} (summary of {} bytes) does not fit its kind", code, summary.size()));
  DDP_ASSERT(origin_node >= -1 && origin_node <= kMaxNodes, fmt::format("origin node {}", origin_node));
  DDP_ASSERT(!succeeded() || !root_cause, "a success with a root cause");
  return fmt::format("{}{} {} {}\n{}\n{}", kMagic, succeeded() ? "success" : "failure", code, origin_node,
                     root_cause ? encode_root_cause(*root_cause) : "", summary);
}

Outcome Outcome::decode(const std::string& value) {
  const auto bad = [&](std::string_view what) {
    return OutcomeError(fmt::format("the job's outcome in the store is malformed ({}): {}", what, quoted(value)));
  };
  const std::size_t nl = value.find('\n');
  if (nl == std::string::npos) throw bad("no header line");
  const std::string_view header(value.data(), nl);
  const bool v1 = header.substr(0, kMagicV1.size()) == kMagicV1;
  if (!v1 && header.substr(0, kMagic.size()) != kMagic) throw bad("not written by ddplaunch 1");
  std::size_t pos = kMagic.size();  // both versions' magic have the same length
  Outcome o;
  const std::size_t kind_end = std::min(header.find(' ', pos), header.size());
  const std::string_view kind = header.substr(pos, kind_end - pos);
  if (kind == "success") {
    o.kind = Kind::Success;
  } else if (kind == "failure") {
    o.kind = Kind::Failure;
  } else {
    throw bad("unknown kind");
  }
  pos = kind_end + 1;
  if (!take_int(header, pos, 0, 255, o.code)) throw bad("bad exit code");
  if (!take_int(header, pos, -1, kMaxNodes, o.origin_node)) throw bad("bad origin node");
  if (pos <= header.size()) throw bad("trailing fields");
  if (!valid(o.kind, o.code)) throw bad("exit code does not fit the kind");
  std::size_t body = nl + 1;
  if (!v1) {
    // Version 2: the record's line, empty when there is none.
    const std::size_t record_end = value.find('\n', body);
    if (record_end == std::string::npos) throw bad("no root-cause line");
    if (record_end > body) {
      o.root_cause = decode_root_cause(std::string_view(value).substr(body, record_end - body));
      if (!o.root_cause) throw bad("unreadable root-cause record");
      if (o.succeeded()) throw bad("a success with a root cause");
    }
    body = record_end + 1;
  }
  o.summary = value.substr(body);
  if (!valid(o)) throw bad("a success with a summary");
  return o;
}

}  // namespace ddp::launcher
