// The controller's standard-input channel to each host's launcher (over ssh, which carries the
// remote command's stdin). It is how the job secret and the forwarded environment reach a host
// without a command line (`ps` shows those to every user of the machine), and how the host's
// launcher learns that the controller wants it stopped, or is gone.
//
// The protocol, in order:
//   1. "ddplaunch-fleet 1\n", "host <name>\n" (the host as the hostfile names it: the launcher's
//      messages then start "ddplaunch@<name>: ", so the controller's console says whose they are),
//      "secret <hex>\n", then one "env NAME=VALUE\n" per variable (in
//      VALUE a backslash is "\\" and a newline "\n"), then "end\n";
//   2. any number of "signal INT\n" or "signal TERM\n": the host's launcher raises that signal on
//      itself, which stops its job as the same signal from a terminal would;
//   3. end of file (the controller closed it, exited or was killed, or the ssh connection broke):
//      the launcher raises SIGTERM on itself. So a launcher whose controller is gone stops its job
//      (and everything under it, by the launcher's own lifetime rules), and no other job's.
#pragma once

#include <string>
#include <thread>

#include "ddplaunch/common/env_lookup.hpp"

namespace ddp::launcher {

// What step 1 carries.
struct ControllerHeader {
  std::string host;
  std::string secret;
  Environment env;
};

// Step 1 as text, for the controller to write. Pure.
std::string encode_controller_header(const ControllerHeader& header);

// Step 2's line for a signal (SIGINT or SIGTERM; anything else is sent as TERM). Pure.
std::string control_signal_line(int signo);

// On the host: reads step 1 from `fd` one byte at a time (nothing after "end\n" is consumed).
// Blocks until the header is complete. Throws ddp::Error naming what was wrong when the input
// ends before "end", a line is malformed, or the header exceeds 1 MiB.
ControllerHeader read_controller_header(int fd);

// On the host, before the command line is parsed and before any thread: names the launcher's
// messages after the host (log::set_program), sets the header's
// variables and the job secret (DDPLAUNCH_RDZV_TOKEN, which the launcher already keeps from its
// workers) in this process's environment, as if the user had exported them in a shell there.
// Moves the channel off fd 0 (workers get /dev/null as stdin) and returns its new descriptor
// (close-on-exec). Throws ddp::Error when a system call fails.
int adopt_controller_header(const ControllerHeader& header, int fd);

// On the host: steps 2 and 3, read on a thread of its own (blocking reads; no event loop is
// needed for one descriptor that only ever ends the job). Start it after the job's lifetime
// guard (workers/job_lifetime.hpp), which must be set up before any thread. The thread is
// detached: it ends with the process.
void watch_controller(int control_fd);

}  // namespace ddp::launcher
