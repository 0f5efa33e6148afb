// The object the precompiled Catch2 header of the test programs is built with (tests/CMakeLists.txt).
