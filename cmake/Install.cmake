# `cmake --install build --prefix P` installs collie as a tool and a library:
#   P/bin/collie (and collie-mpi-worker beside it, when MPI was found);
#   P/share/collie/scenarios, the torch driver and the script hook
#     (script/python), found by collie relative
#     to its own location (backends/data_path.h);
#   P/include/collie/{core,backends,sim}/...: the public headers;
#   P/lib/libcollie_core.a, libcollie_tcp.a and a CMake package:
#     find_package(collie) gives collie::core, collie::tcp (the blocking
#     ProcessGroup API of backends/tcp/process_group.h) and collie::plugin
#     (headers only: a transport plugin resolves the core's symbols from the
#     collie binary that loads it, see docs/backends.md).
include(CMakePackageConfigHelpers)

install(TARGETS collie RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET collie-mpi-worker)
  install(TARGETS collie-mpi-worker RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
if(TARGET collie-nccl-worker)
  install(TARGETS collie-nccl-worker RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/scenarios DESTINATION ${CMAKE_INSTALL_DATADIR}/collie)
install(FILES ${PROJECT_SOURCE_DIR}/backends/torch/collie_torch_worker.py
        DESTINATION ${CMAKE_INSTALL_DATADIR}/collie/backends/torch)
# collie run -- python ...: the hook put on the program's PYTHONPATH.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/script/python DESTINATION ${CMAKE_INSTALL_DATADIR}/collie/script
        PATTERN "__pycache__" EXCLUDE)
install(FILES ${PROJECT_SOURCE_DIR}/backends/remote/collie_fork_server.py
        DESTINATION ${CMAKE_INSTALL_DATADIR}/collie/backends/remote)

foreach(dir core sim backends)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/collie
          FILES_MATCHING PATTERN "*.h" PATTERN "testing" EXCLUDE)
endforeach()

add_library(collie_plugin_headers INTERFACE)
target_include_directories(collie_plugin_headers INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/collie>)
target_compile_features(collie_plugin_headers INTERFACE cxx_std_20)
set_target_properties(collie_core PROPERTIES EXPORT_NAME core)
set_target_properties(collie_tcp PROPERTIES EXPORT_NAME tcp)
set_target_properties(collie_plugin_headers PROPERTIES EXPORT_NAME plugin)
target_compile_features(collie_core INTERFACE cxx_std_20)
install(TARGETS collie_core collie_tcp collie_plugin_headers EXPORT collieTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT collieTargets NAMESPACE collie:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/collie)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/package/collieConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/collieConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/collie)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/collieConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/collieConfig.cmake ${PROJECT_BINARY_DIR}/collieConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/collie)

if(COLLIE_BUILD_TESTS)
  # Install into a fresh prefix, build the example plugin and the TCP example
  # out of tree against it with find_package(collie), and run the installed
  # collie's conformance suite -- scenarios included -- on that plugin.
  add_test(NAME install.out_of_tree_plugin_and_example_against_the_installed_package
           COMMAND ${PROJECT_SOURCE_DIR}/cmake/package/install_test.sh ${PROJECT_BINARY_DIR}
                   ${PROJECT_SOURCE_DIR} ${CMAKE_GENERATOR})
  set_tests_properties(install.out_of_tree_plugin_and_example_against_the_installed_package
                       PROPERTIES TIMEOUT 600 RUN_SERIAL TRUE)
endif()
