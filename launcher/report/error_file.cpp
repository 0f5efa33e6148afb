// See error_file.hpp.
#include "launcher/report/error_file.hpp"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "launcher/rdzv/outcome.hpp"

namespace ddp::launcher {
namespace {

constexpr std::size_t kMaxErrorFileBytes = 1 << 20;  // a traceback, not a core dump

std::string text_of(const nlohmann::json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_null()) return "";
  return j.dump();
}

}  // namespace

std::optional<ErrorRecord> read_error_file(const std::string& path) {
  if (path.empty()) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string content(kMaxErrorFileBytes, '\0');
  in.read(content.data(), static_cast<std::streamsize>(content.size()));
  content.resize(static_cast<std::size_t>(in.gcount()));
  ErrorRecord r;
  const nlohmann::json doc = nlohmann::json::parse(content, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("message")) {
    r.problem = "not an error record (" + printable(content.substr(0, 200)) + ")";
    return r;
  }
  const nlohmann::json& message = doc["message"];
  if (!message.is_object()) {
    r.message = text_of(message);
    return r;
  }
  if (message.contains("message")) r.message = text_of(message["message"]);
  if (message.contains("extraInfo") && message["extraInfo"].is_object()) {
    const nlohmann::json& extra = message["extraInfo"];
    if (extra.contains("py_callstack")) r.traceback = text_of(extra["py_callstack"]);
    if (extra.contains("timestamp")) {
      const std::string t = text_of(extra["timestamp"]);
      try {
        r.timestamp = std::stoll(t);
      } catch (const std::exception&) {
        // Not a number: no timestamp.
      }
    }
  }
  return r;
}

}  // namespace ddp::launcher
