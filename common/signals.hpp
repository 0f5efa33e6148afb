// Signal names, one spelling everywhere: "SIGTERM", "SIGRTMIN+3" for real-time signals, and
// "signal N" for a number that names no signal.
#pragma once

#include <string>

namespace ddp {

// 15 → "SIGTERM", SIGRTMIN+3 → "SIGRTMIN+3"; a number without a name → "signal N". Pure;
// never throws.
std::string signal_name(int signo);

// "SIGTERM", "TERM", "term", "15" or "SIGRTMIN+3" → the number. Throws UsageError naming `name` for anything else.
int parse_signal(const std::string& name);

}  // namespace ddp
