// Writing the Python worker hook into the run directory (python_hook_source() is generated from
// the .py at build time by cmake/embed_text.cmake).
#include "launcher/workers/python_hook.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ddplaunch/common/error.hpp"

namespace ddp::launcher {

namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path, int error) {
  throw Error("cannot " + what + " " + path + " for the Python worker hook: " + std::strerror(error) +
              "; the run directory must be on a writable file system with free space "
              "(give --log_dir one)");
}

}  // namespace

std::string install_python_hook(const std::string& run_dir) {
  const std::string dir = python_hook_dir(run_dir);
  // mkdir's mode is masked by the umask; chmod makes it 0700 whatever the umask and also when the
  // directory was there already (a second call for the same run).
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) fail("create the directory", dir, errno);
  if (::chmod(dir.c_str(), 0700) != 0) fail("set the mode of", dir, errno);

  const std::string file = dir + "/sitecustomize.py";
  // O_NOFOLLOW: a symlink planted in our directory is refused, not written through.
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) fail("create", file, errno);
  int error = ::fchmod(fd, 0600) == 0 ? 0 : errno;
  const std::string_view text = python_hook_source();
  for (std::size_t done = 0; error == 0 && done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      error = errno;
    else
      done += static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0 && error == 0 && errno != EINTR) error = errno;  // EINTR: Linux closed it
  if (error != 0) fail("write", file, error);
  return dir;
}

}  // namespace ddp::launcher

namespace ddp::launcher {

std::string python_hook_dir(const std::string& run_dir) {
  return run_dir + "/python";
}

}  // namespace ddp::launcher
