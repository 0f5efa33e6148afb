// `ddplaunch --status`: the client of a launcher's status endpoint (status_server.hpp), run
// instead of a job. Which launcher:
//   ddplaunch --status               this user's only job on this machine, else the one started in
//                                    the working directory (status/job_lookup.hpp; its store's host
//                                    when several of its launchers run here); stderr names the others
//                                    and how to ask them; none or several there: a list, exit 2
//   ddplaunch --status --rdzv_id ID  the same among the jobs with that run id
//   ddplaunch --status PID           the launcher with that pid
//   ddplaunch --status PATH          the status socket at PATH (<run dir>/status.sock)
#pragma once

#include "launcher/config/launch_config.hpp"

namespace ddp::launcher {

// Prints the chosen launcher's status as indented JSON on stdout and returns 0 (every control
// character of the reply escaped as JSON does, DEL and U+0080..U+009F too: nothing in a reply
// reaches the terminal as a control sequence; a reply that is not JSON or not 200 is quoted on
// stderr the same way); returns 2 after a list of the launchers when several could be meant
// (job_lookup.hpp), and when PATH is not a socket (a FIFO, a file); returns 1 after
// one line on stderr when no launcher is found (none registered yet: a launcher registers a
// second after its workers start), or none answers within 5 s. Blocks.
int print_status(const LaunchConfig& config);

}  // namespace ddp::launcher
