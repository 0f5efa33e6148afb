// This machine's host name, as the launcher prints it and the runtime compares it.
#pragma once

#include <string>

namespace ddp {

// gethostname(2), always NUL-terminated; "" when it fails. Does not block; thread-safe.
std::string host_name();

}  // namespace ddp
