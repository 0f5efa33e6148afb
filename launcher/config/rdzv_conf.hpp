// --rdzv_conf: torchrun's "key=value,..." rendezvous settings, checked against one table of the
// keys ddplaunch knows (rdzv_conf.cpp), each with the kind of value it takes (seconds or text).
#pragma once

#include <string>

#include "launcher/config/launch_config.hpp"

namespace ddp::launcher {

// Parses `text` into config.rdzv_conf (later items win) and applies the keys that set a
// duration: timeout and join_timeout set rdzv_timeout (join_timeout wins when both are given),
// heartbeat_timeout sets heartbeat_timeout; the caller derives heartbeat_interval afterwards.
// The other keys are only kept in config.rdzv_conf (join_job_round reads last_call_timeout).
// "" changes nothing. Throws UsageError naming an item that is not key=value, an unknown key
// (listing the known ones) or a value that is not a number of seconds where one is needed.
void apply_rdzv_conf(const std::string& text, LaunchConfig& config);

}  // namespace ddp::launcher
