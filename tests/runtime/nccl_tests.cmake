# [gpu] tests of the NCCL communicator, built only when runtime/nccl.cmake found NCCL. The binary
# has its own main: without a CUDA device it prints why and exits 77, which ctest reports as
# skipped. Registered with add_test, not catch_discover_tests, because listing the test cases
# would need a GPU too.
if(DDP_HAVE_NCCL)
  add_executable(test_nccl_gpu test_nccl_gpu.cpp)
  target_link_libraries(test_nccl_gpu PRIVATE Catch2::Catch2 ddp_runtime)
  target_include_directories(test_nccl_gpu PRIVATE "${PROJECT_SOURCE_DIR}")
  add_test(NAME "test_nccl_gpu [gpu]" COMMAND test_nccl_gpu)
  set_tests_properties("test_nccl_gpu [gpu]" PROPERTIES SKIP_RETURN_CODE 77 LABELS gpu TIMEOUT 300)
endif()
