# fuzz_test: the fuzz tests (each beside the code it fuzzes) in one binary,
# built only where everything it reaches is compiled with AddressSanitizer
# and UndefinedBehaviorSanitizer (COLLIE_SANITIZE=ON: scripts/test.sh's
# second stage, build-asan/), so that a memory or UB bug a mutant finds fails
# the test. It links the libraries of that build, which are sanitized
# already; before, the main build compiled every library a second time for
# it (a quarter of the main build's CPU). Runs are bounded: 1000 cases per
# property under CTest, and ASan refuses any single allocation above 1 GiB (a
# length taken from the input before it was checked).
if(NOT COLLIE_SANITIZE)
  message(STATUS "fuzz_test: not built (configure with -DCOLLIE_SANITIZE=ON, as scripts/test.sh's sanitized stage does)")
  return()
endif()
add_executable(fuzz_test
  scenario/loader_fuzz_test.cpp
  scenario/expr_fuzz_test.cpp
  scenario/value_fuzz_test.cpp
  backends/tcp/wire_fuzz_test.cpp
  backends/tcp/rendezvous_fuzz_test.cpp
  backends/remote/op_protocol_fuzz_test.cpp
  core/frame_sink_fuzz_test.cpp
  core/transport_fuzz_test.cpp)
collie_target(fuzz_test)
target_compile_definitions(fuzz_test PRIVATE COLLIE_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
target_link_libraries(fuzz_test PRIVATE collie_scenario collie_tcp collie_remote collie_backends collie_core
                      rapidcheck_gtest rapidcheck GTest::gtest GTest::gtest_main)
gtest_discover_tests(fuzz_test DISCOVERY_TIMEOUT 60
  PROPERTIES TIMEOUT 600
  ENVIRONMENT "RC_PARAMS=max_success=1000 verbose_progress=0;ASAN_OPTIONS=max_allocation_size_mb=1024:allocator_may_return_null=0:detect_leaks=1")
