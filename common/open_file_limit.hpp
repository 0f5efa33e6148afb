// The descriptor limit of a process that hosts the store: every rank of a job holds one
// connection to it, so a common soft limit of 1024 would stop a store near 1000 ranks.
#pragma once

namespace ddp {

// Raises this process's soft RLIMIT_NOFILE to its hard limit and returns the soft limit it had
// before (as a long long; -1 when it could not be read). Best effort: when the limit cannot be
// raised the process carries on with the lower one, which the server reports when it runs out
// (EMFILE). Never throws, does not block. Not thread-safe against other threads changing limits.
// Child processes should get the returned value back (start_child does, through ChildOptions::open_files_limit), since
// some programs still use select() and break on descriptors above 1023.
long long raise_open_file_limit();

}  // namespace ddp
