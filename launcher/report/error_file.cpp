// See error_file.hpp.
#include "launcher/report/error_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include <nlohmann/json.hpp>

#include "launcher/config/file_flag.hpp"
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
  ErrorRecord r;
  // The worker chose what stands at this path: a FIFO it made there must not block the launcher
  // (opened non-blocking and refused on its descriptor, config/file_flag.hpp).
  const OpenedFile file = open_file(FileFlag{"TORCHELASTIC_ERROR_FILE", path, FileUse::ReadLater}, O_RDONLY);
  if (file.fd < 0 && file.error == ENOENT) return std::nullopt;
  if (file.fd < 0) {
    r.problem = file.refused;
    return r;
  }
  std::string content;
  read_at_most(file.fd, kMaxErrorFileBytes, content);  // a failed read leaves what came before: judged below
  ::close(file.fd);
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
