# The pip wheel's link rules (`pip install .`, scripts/release.sh; included only when SKBUILD).
# A manylinux wheel may only need libraries every Linux has -- libc, libm, the loader, and
# libstdc++ / libgcc_s up to the policy's symbol versions -- and its tag is the oldest glibc whose
# symbol versions the executables use. Two rules follow (docs/release.md has the numbers):
#   1. Nothing else shared: `auditwheel repair` would copy any other library into the wheel and,
#      since an executable in the wheel's scripts cannot find a library by a fixed relative path,
#      replace it with a Python shim that execs the real binary from site-packages. That shim would
#      cost a Python start per launch and move /proc/self/exe away from the environment's bin/
#      (where ddplaunch looks for the `python` beside it). So ddplaunch-etcd-tls links OpenSSL
#      statically (OPENSSL_USE_STATIC_LIBS, set by pyproject.toml before find_package(OpenSSL)).
#   2. No glibc newer than 2.34 (Ubuntu 22.04 has 2.35, RHEL 9 2.34): GCC 12's static libgcc
#      unwinder calls _dl_find_object (GLIBC_2.35), so ddplaunch takes libgcc_s.so.1 from the
#      system here instead of linking it in (launcher/CMakeLists.txt's -static-libgcc). Its
#      libstdc++ stays static, for the start-up time launcher/CMakeLists.txt gives as the reason,
#      and brings a reference to arc4random (GLIBC_2.36) that launcher/wheel_arc4random.c answers.
# scripts/check_wheel.sh fails a repaired wheel in which auditwheel had to add a shim.
get_target_property(ddp_wheel_link_options ddplaunch LINK_OPTIONS)
list(REMOVE_ITEM ddp_wheel_link_options -static-libgcc)
set_target_properties(ddplaunch PROPERTIES LINK_OPTIONS "${ddp_wheel_link_options}")
target_sources(ddplaunch PRIVATE "${PROJECT_SOURCE_DIR}/launcher/wheel_arc4random.c")
