// See host_name.hpp.
#include "common/host_name.hpp"

#include <unistd.h>

namespace ddp {

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "";
  return buf;
}

}  // namespace ddp
