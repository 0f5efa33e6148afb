// Signal names, one spelling everywhere: "SIGTERM" for a named signal, "signal 40" otherwise.
#pragma once

#include <string>

namespace ddp {

// 15 → "SIGTERM"; a number without a name → "signal N". Pure; never throws.
std::string signal_name(int signo);

// "SIGTERM", "TERM", "term" or "15" → 15. Throws UsageError naming `name` for anything else.
int parse_signal(const std::string& name);

}  // namespace ddp
