// The floor for launch overhead: fork+exec+wait of N copies of a program, nothing else.
//   spawn_floor N PROGRAM   → prints the wall time in seconds
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

extern char** environ;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: spawn_floor N PROGRAM\n");
    return 2;
  }
  const int n = std::atoi(argv[1]);
  const auto start = std::chrono::steady_clock::now();
  std::vector<pid_t> pids;
  char* args[] = {argv[2], nullptr};
  for (int i = 0; i < n; ++i) {
    pid_t pid = 0;
    if (posix_spawn(&pid, argv[2], nullptr, nullptr, args, environ) != 0) return 1;
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
  }
  std::printf("%.6f\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return 0;
}
