// See cancel_event.hpp.
#include "common/cancel_event.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "ddplaunch/common/error.hpp"

namespace ddp {

CancelEvent::CancelEvent() : fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (fd_ < 0) throw Error(std::string("cannot create an eventfd: ") + std::strerror(errno));
}

CancelEvent::~CancelEvent() {
  ::close(fd_);
}

void CancelEvent::cancel() {
  const int saved = errno;  // async-signal-safe: errno left as it was
  const std::uint64_t one = 1;
  // EAGAIN only when the counter is full, which a counter readable already does not need.
  while (::write(fd_, &one, sizeof one) < 0 && errno == EINTR) {
  }
  errno = saved;
}

bool CancelEvent::cancelled() const {
  pollfd p{fd_, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

}  // namespace ddp
