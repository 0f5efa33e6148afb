// The check that a file the launcher writes for the user (--event_log, --summary_json) can be
// written, made when the launcher starts: a job's record is not lost at its end for a typo in a
// directory name.
#pragma once

#include <string>

namespace ddp::launcher {

// Throws UsageError, in one line naming `flag`, `path` and the fix, unless `path` can be written
// now: its directory exists and this process may create files in it, and the file itself, when
// it exists, is not a directory and is writable. Creates and changes nothing; blocks only on the
// file system (stat, access). A later failure to write (a full disk) is the writer's to report.
void check_output_file(const std::string& flag, const std::string& path);

}  // namespace ddp::launcher
