// See exit_codes.hpp.
#include "common/exit_codes.hpp"

#include <sys/wait.h>

namespace ddp {

int exit_code_for_signal(int signo) {
  return 128 + signo;
}

int exit_code_from_wait_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return exit_code_for_signal(WTERMSIG(status));
  return kExitFailure;  // stopped/continued statuses are not ends; callers only pass ends
}

}  // namespace ddp
