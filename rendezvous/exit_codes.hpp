// Process exit codes of ddplaunch's executables, in one place (documented in README.md).
// The launcher adds the worker-derived codes (a worker's own code, 128+N for signal N).
#pragma once

namespace ddp {

enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,       // an unexpected run-time error, message on stderr
  kExitUsage = 2,         // bad command line or configuration (incl. a port already taken)
  kExitInterrupted = 130  // stopped by SIGINT (128 + 2)
};

}  // namespace ddp
