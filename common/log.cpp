// See log.hpp.
#include "common/log.hpp"

#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <memory>
#include <mutex>

#include "ddplaunch/common/error.hpp"

namespace ddp::log {
namespace {

std::atomic<int> g_level{static_cast<int>(Level::Info)};

struct State {
  std::mutex mutex;
  std::string program = "ddplaunch";
  std::shared_ptr<const Sink> sink;  // null: stderr
};

State& state() {
  static State s;
  return s;
}

void write_stderr(const std::string& line) {
  for (std::size_t done = 0; done < line.size();) {
    const ssize_t n = ::write(2, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    // stderr is gone or full: there is nowhere left to report that, so the line is dropped.
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace

Level parse_level(const std::string& text) {
  std::string t;
  for (char c : text) t.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (t == "debug") return Level::Debug;
  if (t == "info") return Level::Info;
  if (t == "warning" || t == "warn") return Level::Warning;
  if (t == "error") return Level::Error;
  throw UsageError("log level '" + text + "' is unknown; use debug, info, warning or error");
}

const char* to_string(Level level) {
  switch (level) {
    case Level::Debug:
      return "debug";
    case Level::Info:
      return "info";
    case Level::Warning:
      return "warning";
    case Level::Error:
      return "error";
  }
  return "info";
}

void set_level(Level level) {
  g_level.store(static_cast<int>(level));
}

Level level() {
  return static_cast<Level>(g_level.load());
}

void set_level_from_env() {
  if (const char* v = std::getenv("DDPLAUNCH_LOG_LEVEL"); v != nullptr && *v != '\0') {
    try {
      set_level(parse_level(v));
    } catch (const UsageError& e) {
      throw UsageError(std::string("DDPLAUNCH_LOG_LEVEL: ") + e.what());
    }
  }
}

void set_program(std::string name) {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().program = std::move(name);
}

void set_sink(Sink sink) {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().sink = sink ? std::make_shared<const Sink>(std::move(sink)) : nullptr;
}

void write(Level level, std::string_view message) {
  if (!enabled(level)) return;
  std::shared_ptr<const Sink> sink;
  std::string prefix;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    sink = state().sink;
    prefix = state().program + ": ";
  }
  std::string lines;
  lines.reserve(message.size() + prefix.size() + 1);
  for (std::size_t start = 0;;) {
    const std::size_t nl = message.find('\n', start);
    const std::string_view line = message.substr(start, nl == std::string_view::npos ? nl : nl - start);
    lines.append(prefix).append(line).push_back('\n');
    if (nl == std::string_view::npos || nl + 1 == message.size()) break;
    start = nl + 1;
  }
  if (sink) return (*sink)(level, std::move(lines));
  write_stderr(lines);
}

}  // namespace ddp::log
