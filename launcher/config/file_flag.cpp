// See file_flag.hpp.
#include "launcher/config/file_flag.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

namespace ddp::launcher {
namespace {

bool same_file(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

// What the rule needs to know of a file found by stat or fstat.
FoundFile found_of(const struct stat& st) {
  FoundFile f;
  f.mode = st.st_mode;
  struct stat other {};
  f.null_device = S_ISCHR(st.st_mode) && ::stat("/dev/null", &other) == 0 && st.st_rdev == other.st_rdev;
  for (const int fd : {STDOUT_FILENO, STDERR_FILENO}) {
    f.own_stream = f.own_stream || (::fstat(fd, &other) == 0 && same_file(st, other));
  }
  return f;
}

// The fix that ends every refusal of `f`.
std::string fix_for(const FileFlag& f) {
  switch (f.use) {
    case FileUse::Read:
      return "give a regular file holding " + f.holds;
    case FileUse::ReadLater:
      return "give the path of a regular file that the training writes (it may be missing until then)";
    case FileUse::Write:
      return "give a regular file path (it is created if missing), or /dev/null";
    case FileUse::Directory:
      return "give a directory path (it is created if missing)";
    case FileUse::Log:
      return "remove it: the launcher makes the workers' log files itself";
  }
  return "";
}

// Whether what exists at `f`'s path is what the flag promises (file_flag.hpp's rule).
bool fits(const FileFlag& f, const FoundFile& found) {
  if (f.use == FileUse::Directory) return S_ISDIR(found.mode);
  if (f.use == FileUse::Log) return !S_ISFIFO(found.mode) && !S_ISSOCK(found.mode) && !S_ISDIR(found.mode);
  if (S_ISREG(found.mode)) return true;
  // /dev/null takes anything at once; the launcher's own stdout or stderr (a terminal, a pipe)
  // blocks no more than the launcher's own messages do.
  return f.use == FileUse::Write && (found.null_device || found.own_stream);
}

// The refusal of `f` for an error of stat or open.
std::string cannot(const FileFlag& f, int error) {
  const bool read = f.use == FileUse::Read || f.use == FileUse::ReadLater;
  return fmt::format("{}={} cannot be {} ({}); {}", f.flag, f.path, read ? "read" : "used", std::strerror(error),
                     fix_for(f));
}

// The directory a missing output file would be created in: it exists, is a directory and takes
// new files. Throws UsageError otherwise.
void check_new_file_directory(const FileFlag& f) {
  std::string dir = std::filesystem::path(f.path).parent_path().string();
  if (dir.empty()) dir = ".";
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    throw UsageError(fmt::format("{}={}: directory {} {}; create it or give a file in an existing directory", f.flag,
                                 f.path, dir, errno == ENOENT ? "does not exist" : std::strerror(errno)));
  }
  if (!S_ISDIR(st.st_mode)) {
    throw UsageError(
        fmt::format("{}={}: {} is not a directory; give a file in an existing directory", f.flag, f.path, dir));
  }
  // access() asks with the real ids, as the launcher (never set-uid) writes; root passes unless
  // the file system is read-only (EROFS).
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    throw UsageError(fmt::format("{}={}: cannot create files in {} ({}); give a file in a writable directory", f.flag,
                                 f.path, dir, std::strerror(errno)));
  }
}

}  // namespace

const char* file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "a special file";
}

std::vector<FileFlag> file_flags(const LaunchConfig& c) {
  std::vector<FileFlag> flags;
  const auto add = [&flags](std::string flag, const std::string& path, FileUse use, std::string holds = "") {
    if (!path.empty()) flags.emplace_back(std::move(flag), path, use, std::move(holds));
  };
  add("--log_dir", c.log_dir, FileUse::Directory);
  add("--progress_file", c.progress_file, FileUse::ReadLater);
  add("--event_log", c.event_log, FileUse::Write);
  add("--summary_json", c.summary_json, FileUse::Write);
  add("--rdzv_conf cacert", c.etcd_ca_file, FileUse::Read, "the CA certificates (PEM)");
  add("--rdzv_conf cert", c.etcd_cert_file, FileUse::Read, "the client certificate (PEM)");
  add("--rdzv_conf key", c.etcd_key_file, FileUse::Read, "the client's private key (PEM)");
  return flags;
}

std::string file_refusal(const FileFlag& f, const FoundFile& found) {
  if (found.error == ENOENT && f.use != FileUse::Read) return "";
  if (found.error != 0) return cannot(f, found.error);
  if (fits(f, found)) return "";
  return fmt::format("{}={} is {}, not {}; {}", f.flag, f.path, file_kind(found.mode),
                     f.use == FileUse::Directory ? "a directory" : "a regular file", fix_for(f));
}

FoundFile find_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return FoundFile{errno};
  return found_of(st);
}

void check_file_flag(const FileFlag& f) {
  const FoundFile found = find_file(f.path);
  // A missing output file is made in its directory, which must exist; a path through a file
  // (ENOTDIR) is named the same way.
  if (f.use == FileUse::Write && (found.error == ENOENT || found.error == ENOTDIR)) return check_new_file_directory(f);
  if (std::string refused = file_refusal(f, found); !refused.empty()) throw UsageError(refused);
  if (found.error != 0 || !S_ISREG(found.mode)) return;
  const bool write = f.use == FileUse::Write;
  if (::access(f.path.c_str(), write ? W_OK : R_OK) != 0) {
    throw UsageError(fmt::format("{}={}: cannot {} it ({}); {}", f.flag, f.path, write ? "write" : "read",
                                 std::strerror(errno), fix_for(f)));
  }
}

void check_file_flags(const LaunchConfig& c) {
  for (const FileFlag& f : file_flags(c)) check_file_flag(f);
}

OpenedFile open_file(const FileFlag& f, int open_flags) {
  OpenedFile out;
  const int fd = ::open(f.path.c_str(), open_flags | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0) {
    out.error = errno;
    // What is there explains the failure better than errno: ENXIO is a FIFO without a reader or
    // a socket, EISDIR a directory.
    if (const FoundFile found = find_file(f.path); found.error == 0) out.refused = file_refusal(f, found);
    if (out.refused.empty()) out.refused = cannot(f, out.error);
    return out;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    out.error = errno;
    out.refused = cannot(f, out.error);
  } else {
    out.refused = file_refusal(f, found_of(st));
  }
  if (out.refused.empty()) {
    // Blocking again from here: writes to the launcher's stderr pipe wait, as they always did.
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags >= 0 && ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0) {
      out.fd = fd;
      return out;
    }
    out.error = errno;
    out.refused = cannot(f, out.error);
  }
  ::close(fd);
  return out;
}

bool read_at_most(int fd, std::size_t limit, std::string& out) {
  out.assign(limit, '\0');
  std::size_t got = 0;
  bool ok = true;
  while (got < limit) {
    const ssize_t n = ::read(fd, out.data() + got, limit - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ok = n == 0;
      break;
    }
    got += static_cast<std::size_t>(n);
  }
  out.resize(got);
  return ok;
}

int open_file_flag(const FileFlag& f, int open_flags) {
  OpenedFile opened = open_file(f, open_flags);
  if (opened.fd < 0) throw UsageError(opened.refused);
  return opened.fd;
}

}  // namespace ddp::launcher
