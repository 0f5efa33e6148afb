// See outcome.hpp.
#include "launcher/outcome.hpp"

#include <charconv>
#include <string_view>

#include <fmt/format.h>

namespace ddp::launcher {
namespace {

constexpr std::string_view kMagic = "ddplaunch-outcome 1 ";

// The next space-separated integer of `header` at `pos`, in [lo, hi].
bool take_int(std::string_view header, std::size_t& pos, int lo, int hi, int& out) {
  const std::size_t end = std::min(header.find(' ', pos), header.size());
  const auto [ptr, ec] = std::from_chars(header.data() + pos, header.data() + end, out);
  if (ec != std::errc() || ptr != header.data() + end || out < lo || out > hi) return false;
  pos = end + 1;
  return true;
}

bool valid(Outcome::Kind kind, int code) {
  return kind == Outcome::Kind::Success ? code == 0 : code >= 1 && code <= 255;
}

}  // namespace

Outcome Outcome::success(int origin_node) {
  return Outcome{Kind::Success, 0, "", origin_node};
}

Outcome Outcome::failure(int code, std::string summary, int origin_node) {
  return Outcome{Kind::Failure, code, std::move(summary), origin_node};
}

std::string Outcome::encode() const {
  DDP_ASSERT(valid(kind, code), fmt::format("outcome code {} does not fit its kind", code));
  DDP_ASSERT(origin_node >= -1 && origin_node <= kMaxNodes, fmt::format("origin node {}", origin_node));
  return fmt::format("{}{} {} {}\n{}", kMagic, succeeded() ? "success" : "failure", code, origin_node, summary);
}

Outcome Outcome::decode(const std::string& value) {
  const auto bad = [&](std::string_view what) {
    const std::string shown = value.size() > 80 ? value.substr(0, 80) + "..." : value;
    return OutcomeError(fmt::format("the job's outcome in the store is malformed ({}): '{}'", what, shown));
  };
  const std::size_t nl = value.find('\n');
  if (nl == std::string::npos) throw bad("no header line");
  const std::string_view header(value.data(), nl);
  if (header.substr(0, kMagic.size()) != kMagic) throw bad("not written by ddplaunch 1");
  std::size_t pos = kMagic.size();
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
  o.summary = value.substr(nl + 1);
  return o;
}

}  // namespace ddp::launcher
