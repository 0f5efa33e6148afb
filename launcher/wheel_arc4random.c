/* arc4random(3) inside the pip wheel's ddplaunch (cmake/wheel.cmake links this file only there).
 *
 * GCC 12's static libstdc++ pulls std::random_device into every program that throws (its COW
 * string instantiations refer to it), and random_device calls arc4random, which glibc has only
 * since 2.36. ddplaunch never uses random_device, but the reference alone would make the wheel
 * manylinux_2_36 and keep it off Ubuntu 22.04 (glibc 2.35) and RHEL 9 (2.34). Defined here, the
 * reference binds to this function instead of glibc's versioned symbol.
 *
 * Blocks only until the kernel's random pool is first seeded (early boot). Thread-safe. Aborts,
 * as glibc's own arc4random does, when the kernel cannot supply random bytes. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/random.h>

uint32_t arc4random(void) {
  uint32_t value;
  while (getrandom(&value, sizeof value, 0) != (ssize_t)sizeof value) {
    if (errno != EINTR) abort();
  }
  return value;
}
