// ddplaunch's version string, printed by --version.
#pragma once

namespace ddp::launcher {
inline constexpr const char* kVersion = "0.1.0";
}
