// For tests of blocking store calls started with std::async: whether a call is still parked a
// moment after it started, and whether it finishes within a bound. Shared by the contract suite,
// the loopback tests and the interop tests against PyTorch's server, so that "blocked" and "long
// enough" mean the same in all of them.
#pragma once

#include <chrono>
#include <future>

namespace ddp::testing {

// How long a call must stay blocked to count as parked, and the default bound for one that
// must finish (generous: a loaded machine is slow, a hang is never this fast).
inline constexpr std::chrono::milliseconds kStillBlocked{100};
inline constexpr std::chrono::milliseconds kLong{10000};

// Waits kStillBlocked; true when `f` has not finished by then.
template <class T>
bool still_blocked(std::future<T>& f) {
  return f.wait_for(kStillBlocked) == std::future_status::timeout;
}

// Waits up to `bound`; true when `f` has finished.
template <class T>
bool finishes(std::future<T>& f, std::chrono::milliseconds bound = kLong) {
  return f.wait_for(bound) == std::future_status::ready;
}

// Milliseconds since `start`.
inline std::chrono::milliseconds since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
}

}  // namespace ddp::testing
