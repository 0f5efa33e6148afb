// The job's page (page/job_page.html) as built into the binary: CMake writes it into
// a generated source as one string at build time (cmake/embed_text.cmake), so the launcher serves it
// with no file to install and nothing to fetch. Pure, thread-safe, never throws.
#pragma once

#include <string_view>

namespace ddp::launcher {

// The page's HTML (its CSS and JavaScript inline), about 14 KB.
std::string_view job_page_html();

}  // namespace ddp::launcher
