// --rdzv_conf: torchrun's "key=value,..." rendezvous settings, checked against one table of the
// keys ddplaunch knows (rdzv_conf.cpp): each key's name, the form of its value (seconds or
// text), what it means, and which backend reads it. The parser, the error for an unknown key,
// the check that a key suits the backend, and the --help text of --rdzv_conf all come from that
// table, so a new key is one line there.
#pragma once

#include <string>
#include <vector>

#include "launcher/config/launch_config.hpp"

namespace ddp::launcher {

// Parses the text of each --rdzv_conf given (`flags`, in order) into config.rdzv_conf, as one
// list, and applies the keys that set a duration: timeout and join_timeout set rdzv_timeout
// (join_timeout wins when both are given), heartbeat_timeout sets heartbeat_timeout,
// last_call_timeout sets last_call_timeout; the caller derives heartbeat_interval afterwards. The
// other keys are only kept in config.rdzv_conf. "" changes nothing. Pure. Throws UsageError naming
// an item that is not key=value, a key given twice (in one flag or in two: torchrun silently
// takes the last), an unknown key (listing the known ones), a secret given on the command line
// (token=, password=), or a value that is not a number of seconds where one is needed.
void apply_rdzv_conf(const std::vector<std::string>& flags, LaunchConfig& config);
inline void apply_rdzv_conf(const std::string& text, LaunchConfig& config) {
  apply_rdzv_conf(std::vector<std::string>{text}, config);
}

// Throws UsageError for the first key in config.rdzv_conf that only another backend reads
// ("--rdzv_conf user applies to --rdzv_backend etcd-v3 only (this job uses static)"). Pure.
void check_rdzv_conf_backend(const LaunchConfig& config);

// The help of --rdzv_conf: every key with the form of its value and its meaning, grouped by the
// backend that reads it, then the torchrun keys that are accepted and unused. Pure.
std::string rdzv_conf_help();

}  // namespace ddp::launcher
