# Warnings and sanitizers as interface targets, never global flags.
add_library(h5dcp_warnings INTERFACE)
if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  target_compile_options(h5dcp_warnings INTERFACE -Wall -Wextra -Wpedantic -Wno-unused-parameter -Wno-missing-field-initializers)
endif()

option(H5DCP_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
add_library(h5dcp_sanitizers INTERFACE)
if(H5DCP_SANITIZE)
  # Any undefined behaviour stops the program (-fno-sanitize-recover), as an
  # ASan report does: a test cannot pass with a UBSan report in its log.
  set(H5DCP_SANITIZER_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=undefined)
  target_compile_options(h5dcp_sanitizers INTERFACE ${H5DCP_SANITIZER_FLAGS} -fno-omit-frame-pointer)
  target_link_options(h5dcp_sanitizers INTERFACE ${H5DCP_SANITIZER_FLAGS})
endif()

# libFuzzer targets (tests/fuzz/, scripts/sanitize.sh): clang only, and only
# with the sanitizers, so a fuzz input that corrupts memory is a crash. The
# library and the fuzz targets are compiled with libFuzzer's coverage
# instrumentation (fuzzer-no-link: no main); other programs that link the
# library get the instrumentation's no-op callbacks from the ASan runtime.
option(H5DCP_FUZZ "Build the libFuzzer targets (clang, with H5DCP_SANITIZE)" OFF)
add_library(h5dcp_fuzz_coverage INTERFACE)
if(H5DCP_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang" OR NOT H5DCP_SANITIZE)
    message(FATAL_ERROR "H5DCP_FUZZ needs clang (libFuzzer) and H5DCP_SANITIZE=ON; "
                        "scripts/sanitize.sh configures such a build in build-san/")
  endif()
  target_compile_options(h5dcp_fuzz_coverage INTERFACE -fsanitize=fuzzer-no-link)
endif()
