// clone3 with CLONE_VM: a child that shares the caller's memory and runs a function on its own
// stack, as vfork does but with clone3's other flags (CLONE_INTO_CGROUP). Without CLONE_VM,
// clone3(CLONE_VFORK) copies the caller's page tables like fork, and the caller then takes a
// copy-on-write fault on each page it writes: per worker started, a cost that grows with the
// launcher's memory. glibc (2.36) has no clone3 wrapper that takes a function and a stack, so
// the system call is made here, in assembly for x86-64 (clone_shared.cpp); elsewhere, and in
// sanitizer builds, it reports ENOSYS and the caller falls back.
#pragma once

#include <linux/sched.h>
#include <sys/types.h>

#include <cstddef>

namespace ddp {

// Calls clone3(args) with CLONE_VM added and `stack`/`stack_size` as the child's stack; the
// child runs entry(arg), which must not return (it execs or _exits). With CLONE_VFORK in
// args->flags the call returns once the child has exec'd or exited. Returns the child's pid, or
// -1 with errno (ENOSYS on an architecture without the assembly, or a kernel without clone3).
// Never throws. Thread-safe as clone3 is; the child must touch nothing but its arguments and
// system calls (it runs on the caller's memory).
pid_t clone_shared(clone_args& args, char* stack, std::size_t stack_size, void (*entry)(void*), void* arg);

}  // namespace ddp
