// For tests of user-facing errors: the message of the UsageError a call throws, or a marker
// starting with "<" that says what happened instead, so a failed CHECK shows either.
#pragma once

#include <exception>
#include <string>

#include "ddplaunch/common/error.hpp"

namespace ddp::testing {

// Runs `call()`; returns the UsageError's message, "<no exception>", or "<not a UsageError> ..."
// with the other exception's message.
template <typename Call>
std::string usage_error_of(Call&& call) {
  try {
    call();
    return "<no exception>";
  } catch (const UsageError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<not a UsageError> ") + e.what();
  }
}

}  // namespace ddp::testing
