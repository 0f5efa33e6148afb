# The pip wheel's link rules (`pip install .`, scripts/release.sh; included only when SKBUILD).
# A manylinux wheel may only need the system libraries every Linux has (libc, libm, libpthread,
# libdl, the loader): `auditwheel repair` copies any other library into the wheel and, since an
# executable in the wheel's scripts cannot find a library by a fixed relative path, replaces it with
# a Python shim that execs the real binary from site-packages. That shim would cost a Python start
# per launch and move /proc/self/exe away from the environment's bin/ (where ddplaunch looks for
# the `python` beside it), so the executables link everything else statically instead:
#   - libstdc++ and libgcc: as ddplaunch already does (launcher/CMakeLists.txt) -- this also keeps
#     GCC 12's newer GLIBCXX symbol versions out of the manylinux tag;
#   - OpenSSL (ddplaunch-etcd-tls only): OPENSSL_USE_STATIC_LIBS, set by pyproject.toml before
#     launcher/CMakeLists.txt runs find_package(OpenSSL).
# scripts/check_wheel.sh fails a repaired wheel in which auditwheel had to add a shim.
foreach(exe ddplaunch-store ddplaunch-etcd-tls)
  target_link_options(${exe} PRIVATE -static-libstdc++ -static-libgcc)
endforeach()
