# fuzz_test: the fuzz tests (each beside the code it fuzzes) in one binary
# that compiles them and everything they reach with AddressSanitizer and
# UndefinedBehaviorSanitizer, so that a memory or UB bug a mutant finds fails
# the test. Runs are bounded: 1000 cases per property under CTest, and ASan
# refuses any single allocation above 1 GiB (a length taken from the input
# before it was checked).
find_package(nlohmann_json REQUIRED)
find_package(yaml-cpp REQUIRED)
file(GLOB fuzz_sources
  ${PROJECT_SOURCE_DIR}/core/*.cpp ${PROJECT_SOURCE_DIR}/core/algorithms/*.cpp
  ${PROJECT_SOURCE_DIR}/sim/*.cpp ${PROJECT_SOURCE_DIR}/backends/*.cpp ${PROJECT_SOURCE_DIR}/backends/sim/*.cpp
  ${PROJECT_SOURCE_DIR}/backends/tcp/*.cpp
  ${PROJECT_SOURCE_DIR}/backends/remote/*.cpp ${PROJECT_SOURCE_DIR}/backends/torch/*.cpp
  ${PROJECT_SOURCE_DIR}/backends/mpi/mpi_backend.cpp ${PROJECT_SOURCE_DIR}/backends/mpi/mpi_version.cpp
  ${PROJECT_SOURCE_DIR}/backends/nccl/nccl_backend.cpp
  # The CUDA backends on HostRuntime only (CudaRuntime needs the toolkit).
  ${PROJECT_SOURCE_DIR}/backends/cuda/host_runtime.cpp ${PROJECT_SOURCE_DIR}/backends/cuda/cuda_transport.cpp
  ${PROJECT_SOURCE_DIR}/backends/cuda/staging.cpp ${PROJECT_SOURCE_DIR}/backends/cuda/host_tensor_dist.cpp
  ${PROJECT_SOURCE_DIR}/backends/cuda/cuda_backend.cpp
  ${PROJECT_SOURCE_DIR}/check/*.cpp
  ${PROJECT_SOURCE_DIR}/scenario/*.cpp)
list(FILTER fuzz_sources EXCLUDE REGEX "_test\\.cpp$|scenario/search\\.cpp$")
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
