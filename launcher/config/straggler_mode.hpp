// --stragglers: what a straggler found makes ddplaunch do (docs/stragglers.md). Pure; thread-safe.
#pragma once

#include <optional>
#include <string>

namespace ddp::launcher {

enum class StragglerMode {
  Off,      // no detection at all (no worker is asked anything)
  Warn,     // the default: say it (console, --status, event log, summary)
  Exclude,  // and leave the slow node out at the next restart (an elastic job with nodes to spare)
  Replace,  // and, after --straggler_replace_after, restart the round with a spare in its place
};

inline const char* to_string(StragglerMode mode) {
  switch (mode) {
    case StragglerMode::Off:
      return "off";
    case StragglerMode::Warn:
      return "warn";
    case StragglerMode::Exclude:
      return "exclude";
    case StragglerMode::Replace:
      return "replace";
  }
  return "?";
}

// nullopt: not one of the four words.
inline std::optional<StragglerMode> straggler_mode_from(const std::string& word) {
  for (StragglerMode m : {StragglerMode::Off, StragglerMode::Warn, StragglerMode::Exclude, StragglerMode::Replace}) {
    if (word == to_string(m)) return m;
  }
  return std::nullopt;
}

}  // namespace ddp::launcher
