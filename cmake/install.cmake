# Install rules: `cmake --install <build> --prefix <prefix>` puts the ddplaunch and ddplaunch-store
# executables in <prefix>/bin and, when the runtime is built, the runtime's static libraries, its
# public headers and a CMake package, so a user's own project can write
#   find_package(ddplaunch CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE ddplaunch::runtime)
# Included at the end of the root CMakeLists.txt, once every target exists.
#
# Installed tree:
#   bin/ddplaunch, bin/ddplaunch-store, bin/ddplaunch-etcd-tls (TLS to etcd, launcher/etcd/etcd_tls_proxy.hpp)
#   include/ddplaunch/*.hpp            the runtime's public headers
#   include/ddplaunch/rendezvous/*.hpp the store's public headers (store, clients, server, errors)
#   include/ddplaunch/common/*.hpp     the common layer's public headers (errors, environment)
#   lib/libddp_runtime.a, lib/libddp_rendezvous.a, lib/libddp_common.a
#   lib/cmake/ddplaunch/               ddplaunchConfig.cmake, ddplaunchConfigVersion.cmake,
#                                      ddplaunchTargets*.cmake (ddplaunch::runtime, ::rendezvous,
#                                      ::common)
# Private headers (the store's parser, state and sockets; the common layer's process and Slurm
# helpers) stay in the source tree: nothing installed includes them.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

if(SKBUILD)
  # `pip install .` (pyproject.toml, scikit-build-core): the two executables go to the Python
  # environment's bin/ (the wheel's scripts), beside the interpreter ddplaunch then picks for
  # Python workers (launcher/config/python_interpreter.hpp). Nothing else is installed.
  include("${CMAKE_CURRENT_LIST_DIR}/wheel.cmake")
  install(TARGETS ddplaunch ddplaunch-store ddplaunch-etcd-tls RUNTIME DESTINATION "${SKBUILD_SCRIPTS_DIR}")
  return()
endif()

install(TARGETS ddplaunch ddplaunch-store ddplaunch-etcd-tls RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}")

if(DDP_WITH_TORCH)
  # Exported as ddplaunch::runtime, ::rendezvous and ::common, the names of the build tree's aliases.
  set_target_properties(ddp_runtime PROPERTIES EXPORT_NAME runtime)
  set_target_properties(ddp_rendezvous PROPERTIES EXPORT_NAME rendezvous)
  set_target_properties(ddp_common PROPERTIES EXPORT_NAME common)
  install(TARGETS ddp_runtime ddp_rendezvous ddp_common EXPORT ddplaunchTargets
    ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}")

  # Each library's include/ directory holds exactly its public headers, under include/ddplaunch/.
  foreach(lib runtime rendezvous common)
    install(DIRECTORY "${PROJECT_SOURCE_DIR}/${lib}/include/ddplaunch" DESTINATION include
      FILES_MATCHING PATTERN "*.hpp")
  endforeach()

  set(DDP_CMAKE_INSTALL_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/ddplaunch")
  install(EXPORT ddplaunchTargets NAMESPACE ddplaunch:: DESTINATION "${DDP_CMAKE_INSTALL_DIR}")

  # What ddplaunchConfig.cmake records of this build: the torch it was built against (a fallback
  # for users who do not point CMAKE_PREFIX_PATH at a torch), the CUDA arch list that keeps
  # Caffe2's GPU detection away (see runtime/CMakeLists.txt), and whether the NCCL communicator,
  # and with it the wheel's libnccl and CUDA::cudart, is part of the runtime's interface.
  set(DDP_CONFIG_TORCH_DIR "${Torch_DIR}")
  get_directory_property(DDP_CONFIG_TORCH_CUDA_ARCH_LIST DIRECTORY runtime DEFINITION TORCH_CUDA_ARCH_LIST)
  set(DDP_CONFIG_WITH_NCCL "${DDP_HAVE_NCCL}")
  set(DDP_CONFIG_NCCL_LIBRARY "")
  if(DDP_HAVE_NCCL)
    set(DDP_CONFIG_NCCL_LIBRARY "${DDP_NCCL_LIBRARY}")
  endif()
  configure_package_config_file("${CMAKE_CURRENT_LIST_DIR}/ddplaunchConfig.cmake.in"
    "${PROJECT_BINARY_DIR}/ddplaunchConfig.cmake" INSTALL_DESTINATION "${DDP_CMAKE_INSTALL_DIR}")
  write_basic_package_version_file("${PROJECT_BINARY_DIR}/ddplaunchConfigVersion.cmake"
    VERSION "${PROJECT_VERSION}" COMPATIBILITY SameMajorVersion)
  install(FILES "${PROJECT_BINARY_DIR}/ddplaunchConfig.cmake" "${PROJECT_BINARY_DIR}/ddplaunchConfigVersion.cmake"
    DESTINATION "${DDP_CMAKE_INSTALL_DIR}")
endif()
