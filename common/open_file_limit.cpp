// See open_file_limit.hpp.
#include "common/open_file_limit.hpp"

#include <sys/resource.h>

namespace ddp {

long long raise_open_file_limit() {
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) != 0) return -1;
  const auto before = static_cast<long long>(files.rlim_cur);
  if (files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    // Best effort (see the header): a failure leaves the old limit in place.
    ::setrlimit(RLIMIT_NOFILE, &files);
  }
  return before;
}

}  // namespace ddp
