# Warnings and sanitizers as interface targets, never global flags.
add_library(h5dcp_warnings INTERFACE)
if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  target_compile_options(h5dcp_warnings INTERFACE -Wall -Wextra -Wpedantic -Wno-unused-parameter -Wno-missing-field-initializers)
endif()

option(H5DCP_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
add_library(h5dcp_sanitizers INTERFACE)
if(H5DCP_SANITIZE)
  target_compile_options(h5dcp_sanitizers INTERFACE -fsanitize=address,undefined -fno-omit-frame-pointer)
  target_link_options(h5dcp_sanitizers INTERFACE -fsanitize=address,undefined)
endif()
