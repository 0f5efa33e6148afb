// Builds the precompiled LibTorch header that the runtime's heavier test programs and the example
// trainer reuse (tests/runtime/CMakeLists.txt); it has no code of its own.
