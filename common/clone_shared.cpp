// See clone_shared.hpp.
#include "common/clone_shared.hpp"

#include <sys/syscall.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

namespace ddp {

// Not under AddressSanitizer or ThreadSanitizer: they track each thread's stack and would see
// the child's calls on an unknown one; those builds keep the copying clone3. GCC says so with
// __SANITIZE_*__, Clang (14) only through __has_feature.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define DDP_CLONE_SHARED_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define DDP_CLONE_SHARED_SANITIZED 1
#endif
#endif

pid_t clone_shared(clone_args& args, char* stack, std::size_t stack_size, void (*entry)(void*), void* arg) {
#if defined(__x86_64__) && !defined(DDP_CLONE_SHARED_SANITIZED)
  args.flags |= CLONE_VM;
  args.stack = reinterpret_cast<std::uint64_t>(stack);
  args.stack_size = stack_size & ~std::size_t{15};  // the child's stack pointer: 16-byte aligned
  // The child resumes after `syscall` with %rax = 0 and %rsp at the top of its own stack, with
  // every other register as the parent had it: entry and arg are in callee-saved registers
  // (r12, r13), which the syscall leaves alone. The child calls entry(arg) and never comes back
  // here: nothing of this function's frame is used on its stack.
  register void (*entry_reg)(void*) asm("r12") = entry;
  register void* arg_reg asm("r13") = arg;
  long ret;
  asm volatile(
      "syscall\n\t"
      "testq %%rax, %%rax\n\t"
      "jnz 1f\n\t"
      "xorl %%ebp, %%ebp\n\t"
      "movq %%r13, %%rdi\n\t"
      "callq *%%r12\n\t"
      "ud2\n\t"
      "1:\n\t"
      : "=a"(ret)
      : "a"(static_cast<long>(SYS_clone3)), "D"(&args), "S"(sizeof args), "r"(entry_reg), "r"(arg_reg)
      : "rcx", "r11", "memory");
  if (ret < 0) {
    errno = static_cast<int>(-ret);
    return -1;
  }
  return static_cast<pid_t>(ret);
#else
  (void)args, (void)stack, (void)stack_size, (void)entry, (void)arg;
  errno = ENOSYS;
  return -1;
#endif
}

}  // namespace ddp
