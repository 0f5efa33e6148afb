// One small logging facility for the launcher, the store and the runtime: levels, one sink.
//
// Messages are single lines; the sink adds the program's prefix ("ddplaunch: ") and the newline.
// The launcher points the sink at its console writer, so its own lines keep their order with
// the workers' lines; other programs keep the default sink, one write(2) to stderr per line.
// The level comes from --log_level or DDPLAUNCH_LOG_LEVEL (debug, info, warning, error; default
// info). All functions are thread-safe; set_sink and set_program are meant for start-up.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

namespace ddp::log {

enum class Level { Debug = 0, Info = 1, Warning = 2, Error = 3 };

// "debug", "info", "warning" (or "warn"), "error", any case. Throws UsageError naming `text`.
Level parse_level(const std::string& text);
const char* to_string(Level level);

void set_level(Level level);
Level level();
inline bool enabled(Level l) {
  return static_cast<int>(l) >= static_cast<int>(level());
}
// Sets the level from DDPLAUNCH_LOG_LEVEL when it is set. Throws UsageError for a bad value.
void set_level_from_env();

// The prefix of every line, e.g. "ddplaunch" gives "ddplaunch: ...". Default "ddplaunch".
void set_program(std::string name);

// Receives whole lines, prefix and '\n' included. nullptr restores the default (stderr).
using Sink = std::function<void(Level, std::string line)>;
void set_sink(Sink sink);

// Writes `message` (one or more lines; each gets the prefix) at `level` if it is enabled.
void write(Level level, std::string_view message);

template <class... Args>
void debug(fmt::format_string<Args...> f, Args&&... args) {
  if (enabled(Level::Debug)) write(Level::Debug, fmt::format(f, std::forward<Args>(args)...));
}
template <class... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
  if (enabled(Level::Info)) write(Level::Info, fmt::format(f, std::forward<Args>(args)...));
}
template <class... Args>
void warning(fmt::format_string<Args...> f, Args&&... args) {
  if (enabled(Level::Warning)) write(Level::Warning, fmt::format(f, std::forward<Args>(args)...));
}
template <class... Args>
void error(fmt::format_string<Args...> f, Args&&... args) {
  if (enabled(Level::Error)) write(Level::Error, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace ddp::log
