// A process's state and CPU time from /proc/<pid>/stat (proc(5)), read in one place for the hang
// watch and the stack dumper. Never throws; thread-safe.
#pragma once

namespace ddp::launcher {

struct ProcStat {
  char state = 0;            // proc(5)'s letter: 'R', 'S', 'D', 'T' stopped, 'Z'...; 0: gone
  long long cpu_ticks = -1;  // utime + stime of all its threads, in clock ticks; -1: gone
};

ProcStat read_proc_stat(int pid);

// "running", "sleeping (waiting for an event)", "stopped (SIGSTOP or a job-control signal)", ...
const char* describe_state(char state);

}  // namespace ddp::launcher
