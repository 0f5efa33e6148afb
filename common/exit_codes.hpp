// Process exit codes of ddplaunch's executables and of spawn(), in one place (documented in
// README.md), and the one rule that turns how a child ended into the code we report: its own
// exit code, or 128+N when signal N killed it (as shells and ninja do; 130 for SIGINT).
#pragma once

namespace ddp {

enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,        // an unexpected run-time error, or a lost peer/store; message on stderr
  kExitUsage = 2,          // bad command line or configuration (incl. a port already taken, a FIFO as a file flag,
                           // a host failing --hostfile's preflight)
  kExitUnhealthy = 69,     // a node failed its health checks before a round (as EX_UNAVAILABLE)
  kExitUnkillable = 71,    // a worker outlived SIGKILL (stuck in the kernel, state D): drain this host (as EX_OSERR)
  kExitNoProgress = 123,   // restarts stopped: K restarts without progress; do not requeue the job
  kExitHang = 124,         // ranks stuck in a collective (--hang_timeout), or a desync (as timeout(1) exits)
  kExitExecFailed = 127,   // a child could not be started (as a shell reports it)
  kExitInterrupted = 130,  // stopped by SIGINT (128 + 2)
};

// What each of the codes above means to a user, in the order `ddplaunch --help` lists them
// (after the rule for a failing worker: its own code, or 128+N for signal N). README.md's table
// says the same at more length.
struct ExitCodeMeaning {
  ExitCode code;
  const char* meaning;
};
inline constexpr ExitCodeMeaning kExitCodeMeanings[] = {
    {kExitOk, "success"},
    {kExitFailure, "launcher error, a lost node or store (see the message)"},
    {kExitUsage, "bad usage or configuration (or a host failing --hostfile's preflight)"},
    {kExitUnhealthy, "a node failed its health checks (--health_check); the report names it and the check"},
    {kExitUnkillable, "a worker outlived SIGKILL (stuck in the kernel, state D): the host is not reused; drain it"},
    {kExitNoProgress, "restarts without progress (--max_no_progress_restarts): do not requeue"},
    {kExitHang, "a hang (--hang_timeout) or a desync in a collective"},
    {kExitExecFailed, "a worker could not be started"},
    {kExitInterrupted, "interrupted (SIGINT)"},
};

// 128 + signo: the code for a process ended by (or stopping because of) signal `signo`.
int exit_code_for_signal(int signo);

// The code for a wait status as waitpid(2) returns it: WEXITSTATUS, or 128+N for signal N.
// Pure; never throws.
int exit_code_from_wait_status(int status);

}  // namespace ddp
