// Who may read the status port over TCP (--status_port): the page at `/`, its JSON at `/status`
// and the stack action at `/stack`. With a job secret, every one of them needs the page's token,
// which the launcher prints with the page's URL ("status: http://h1:29600/?token=..."); /healthz
// never does (probes know no token). Without a secret, anyone who reaches the port reads them,
// as anyone who reaches the store reads its keys (docs/job-page.md says who that is). The unix
// socket in the run's 0700 directory is this user's own and needs no token (`ddplaunch --status`).
//
// The token is derived from the job secret and the run id (HMAC-SHA256, 128 bits in hex), so every
// launcher of the job prints the same one and a node's page can link to node 0's with it. Whoever
// holds the secret can compute it; nobody else can.
// Pure and thread-safe; nothing here blocks or throws (but std::bad_alloc).
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace ddp::launcher {

// The page's token for a job with this secret: 32 lower-case hex digits; "" without a secret.
std::string page_token(std::string_view secret, std::string_view run_id);

// A request's target split: "/stack?rank=3&token=ab" is path "/stack" and {rank: 3, token: ab}.
// Percent-escapes in values are decoded; a key given twice keeps its first value.
struct RequestTarget {
  std::string path;
  std::map<std::string, std::string> query;
};
RequestTarget parse_target(std::string_view target);

// True when no token is needed (`token` empty) or the request carries it, as the query's
// `token` or an "Authorization: Bearer <token>" header (`authorization`: that header's value).
// Compared in constant time.
bool has_token(const std::string& token, const RequestTarget& target, std::string_view authorization);

}  // namespace ddp::launcher
