# fuzz_test: the fuzz tests (each beside the code it fuzzes) in one binary
# that compiles them and everything they reach with AddressSanitizer and
# UndefinedBehaviorSanitizer, so that a memory or UB bug a mutant finds fails
# the test. Runs are bounded: 1000 cases per property under CTest, and ASan
# refuses any single allocation above 1 GiB (a length taken from the input
# before it was checked).
find_package(nlohmann_json REQUIRED)
find_package(yaml-cpp REQUIRED)
# The sources are the libraries' own lists (each target's SOURCES), so a file
# added to a library is fuzzed with it. Device code (.cu, object libraries)
# stays out: CudaRuntime needs the toolkit; the CUDA backends run here on
# HostRuntime only.
set(fuzz_libraries collie_core collie_sim collie_check collie_tcp collie_remote collie_mpi_version
    collie_backends collie_cuda_host collie_cuda collie_scenario)
set(fuzz_sources)
foreach(lib IN LISTS fuzz_libraries)
  get_target_property(lib_dir ${lib} SOURCE_DIR)
  get_target_property(lib_sources ${lib} SOURCES)
  foreach(src IN LISTS lib_sources)
    if(src MATCHES "^\\$<" OR src MATCHES "\\.cu$")
      continue()
    endif()
    if(NOT IS_ABSOLUTE "${src}")
      set(src "${lib_dir}/${src}")
    endif()
    list(APPEND fuzz_sources "${src}")
  endforeach()
endforeach()
set(fuzz_tests
  ${PROJECT_SOURCE_DIR}/scenario/loader_fuzz_test.cpp
  ${PROJECT_SOURCE_DIR}/scenario/expr_fuzz_test.cpp
  ${PROJECT_SOURCE_DIR}/scenario/value_fuzz_test.cpp
  ${PROJECT_SOURCE_DIR}/backends/tcp/wire_fuzz_test.cpp
  ${PROJECT_SOURCE_DIR}/backends/tcp/rendezvous_fuzz_test.cpp
  ${PROJECT_SOURCE_DIR}/backends/remote/op_protocol_fuzz_test.cpp
  ${PROJECT_SOURCE_DIR}/core/frame_sink_fuzz_test.cpp
  ${PROJECT_SOURCE_DIR}/core/transport_fuzz_test.cpp)
add_executable(fuzz_test ${fuzz_tests} ${fuzz_sources})
collie_target(fuzz_test)
target_compile_definitions(fuzz_test PRIVATE COLLIE_SOURCE_DIR="${PROJECT_SOURCE_DIR}" ASIO_STANDALONE
                           ASIO_NO_DEPRECATED)
target_include_directories(fuzz_test SYSTEM PRIVATE ${ASIO_INCLUDE_DIR})
target_link_libraries(fuzz_test PRIVATE yaml-cpp ${CMAKE_DL_LIBS} Threads::Threads OpenSSL::Crypto
                      nlohmann_json::nlohmann_json rapidcheck_gtest rapidcheck GTest::gtest GTest::gtest_main)
set(sanitize -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
# -O0 -g1: UBSan's checks make GCC's optimiser several times slower (a
# sanitized file took 50 s at -O2 -g, 7 s at -O0 -g1), and this binary
# compiles the whole project a second time; line tables are enough for
# ASan's stack traces.
target_compile_options(fuzz_test PRIVATE ${sanitize} -O0 -g1)
target_link_options(fuzz_test PRIVATE ${sanitize})
gtest_discover_tests(fuzz_test DISCOVERY_TIMEOUT 60
  PROPERTIES TIMEOUT 600
  ENVIRONMENT "RC_PARAMS=max_success=1000 verbose_progress=0;ASAN_OPTIONS=max_allocation_size_mb=1024:allocator_may_return_null=0:detect_leaks=1")
