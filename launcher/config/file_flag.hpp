// The one rule for every flag that names a file or a directory: --progress_file, --event_log,
// --summary_json, --log_dir, and --rdzv_conf token_file, password_file, cacert, cert and key.
// What is there must be what the flag promises, or the launcher exits 2 before anything starts,
// in one line naming the flag, the value and the fix:
//   - a file the launcher reads (secrets, TLS keys) or reads at each round (--progress_file, which
//     may be missing until the training writes it) is a regular file, or a symlink to one;
//   - a file the launcher writes (--event_log, --summary_json) is a regular file (created when
//     missing, in an existing writable directory), /dev/null, or the launcher's own stdout or
//     stderr (/dev/stderr: --event_log_handler=console);
//   - --log_dir is a directory (created when missing).
// A FIFO, a socket, a device (/dev/zero) or a directory where a file is expected is refused: a
// FIFO would block the launcher for ever when opened, /dev/zero would never end. Nothing here
// blocks beyond the file system: the checks stat the path, and what the launcher keeps open
// it opens non-blocking and checks with fstat on the descriptor (no race with a file swapped
// between a check and the open). All functions are thread-safe.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "launcher/config/launch_config.hpp"

namespace ddp::launcher {

// What a flag's path is for.
enum class FileUse {
  Read,       // a regular file read once (a secret, a certificate); it must exist
  ReadLater,  // a regular file read at each round (--progress_file); it may be missing
  Write,      // a regular file written or appended to, /dev/null, or the launcher's stdout/stderr
  Directory,  // a directory (--log_dir), created when missing
  Log,        // a worker's log file under --log_dir, written as it is: anything that cannot block
              // the launcher (not a FIFO, a socket or a directory); a device such as /dev/full is
              // written, and its errors are the log's
};

struct FileFlag {
  FileFlag(std::string flag_name, std::string flag_path, FileUse flag_use, std::string file_holds = "")
      : flag(std::move(flag_name)), path(std::move(flag_path)), use(flag_use), holds(std::move(file_holds)) {}
  std::string flag;  // as the user wrote it: "--event_log", "--rdzv_conf token_file"
  std::string path;
  FileUse use;
  std::string holds;  // FileUse::Read: what the file holds, for the fix ("the job secret")
};

// What is found at a path, as the rule needs it.
struct FoundFile {
  int error = 0;             // 0: it exists; else errno of stat or open (ENOENT: missing)
  mode_t mode = 0;           // when it exists
  bool null_device = false;  // it is /dev/null
  bool own_stream = false;   // it is the launcher's own stdout or stderr (a terminal, a pipe, a file)
};

// Every flag of `config` that names a file or directory, except token_file and password_file,
// which are read (through open_file_flag) while the command line becomes a config. Pure.
std::vector<FileFlag> file_flags(const LaunchConfig& config);

// The one-line refusal of `found` for `flag`, or "" when the rule above allows it. A missing
// path is allowed except for FileUse::Read. Pure.
std::string file_refusal(const FileFlag& flag, const FoundFile& found);

// "a FIFO", "a directory", "a character device"...: what a file of this mode is, for messages.
const char* file_kind(mode_t mode);

// What stat(2) finds at `path` (following symlinks). Never opens the path, so never blocks on a
// FIFO.
FoundFile find_file(const std::string& path);

// Checks `flag` where it stands now: file_refusal() of find_file(), and for FileUse::Write a
// missing file's directory exists and takes new files, an existing file is writable. Creates and
// changes nothing. Throws UsageError (one line: the flag, the path, the fix).
void check_file_flag(const FileFlag& flag);

// check_file_flag() for each of file_flags(config), in order; throws for the first refused.
void check_file_flags(const LaunchConfig& config);

// A descriptor of `flag.path`, or why there is none. `fd` >= 0 is the caller's to close.
struct OpenedFile {
  int fd = -1;
  int error = 0;        // errno of open when it failed (ENOENT: missing)
  std::string refused;  // the one-line refusal when fd < 0 (also for a missing file)
};

// Opens `flag.path` with `open_flags` | O_NONBLOCK | O_CLOEXEC (a FIFO without a writer or a
// reader then fails or opens at once instead of blocking), checks the opened file with fstat
// and file_refusal(), and clears O_NONBLOCK again. Creates a missing file 0644 when `open_flags`
// has O_CREAT. Never throws (but std::bad_alloc); blocks on the file system only.
OpenedFile open_file(const FileFlag& flag, int open_flags);

// open_file(), throwing UsageError with `refused` when there is no descriptor.
int open_file_flag(const FileFlag& flag, int open_flags);

// Reads `fd` into `out` until its end or `limit` bytes, whichever comes first (EINTR retried).
// False, with errno set and what came before in `out`, when a read fails. Blocks as read(2) does
// (not at all on a regular file).
bool read_at_most(int fd, std::size_t limit, std::string& out);

}  // namespace ddp::launcher
