// See signals.hpp.
#include "common/signals.hpp"

#include <csignal>
#include <cstring>

#include <algorithm>
#include <cctype>

#include "ddplaunch/common/error.hpp"

namespace ddp {

std::string signal_name(int signo) {
  if (const char* abbrev = ::sigabbrev_np(signo)) return std::string("SIG") + abbrev;
  // glibc names no real-time signal; these are the names kill -l uses.
  if (signo > SIGRTMIN && signo <= SIGRTMAX) return "SIGRTMIN+" + std::to_string(signo - SIGRTMIN);
  if (signo == SIGRTMIN) return "SIGRTMIN";
  return "signal " + std::to_string(signo);
}

int parse_signal(const std::string& name) {
  std::string upper;
  for (char ch : name) {
    if (!std::isspace(static_cast<unsigned char>(ch)))
      upper.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(ch))));
  }
  if (!upper.empty() && upper.size() < 4 &&
      std::all_of(upper.begin(), upper.end(), [](unsigned char ch) { return std::isdigit(ch); })) {
    const int n = std::stoi(upper);
    if (n > 0 && n < NSIG) return n;
  }
  if (upper.rfind("SIG", 0) != 0) upper = "SIG" + upper;
  for (int n = 1; n < NSIG; ++n) {
    if (signal_name(n) == upper) return n;
  }
  throw UsageError("unknown signal '" + name + "'; use names such as SIGTERM,SIGUSR1 or numbers");
}

}  // namespace ddp
