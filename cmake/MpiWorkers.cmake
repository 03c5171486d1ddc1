# collie-mpi-worker for MPI libraries besides the one find_package(MPI)
# chose, so that `collie ... --backend mpi` can check any MPI: the worker
# must be built against the MPI whose mpirun starts it.
#
#   cmake -B build -DCOLLIE_EXTRA_MPI="mpich=/usr/bin/mpicc.mpich;impi=/opt/intel/mpi/bin/mpicc"
#   cmake --build build --target collie-mpi-worker-mpich
#   collie conformance --backend mpi --mpirun mpirun.mpich --mpi-worker build/tools/collie-mpi-worker-mpich
#
# Each entry is NAME=MPICC: the MPI's C compiler wrapper, whose -show
# (MPICH, MVAPICH, Intel MPI) or --showme (Open MPI) gives its include
# directories and libraries. Only the MPI adapter and the worker's main are
# compiled against it; the rest of collie does not include mpi.h. Debian's
# MPICH (mpicc.mpich on PATH, or under COLLIE_MPICH_ROOT) is added as
# "mpich" unless an entry names it.
set(COLLIE_EXTRA_MPI "" CACHE STRING "Other MPI libraries to build collie-mpi-worker-NAME against: NAME=MPICC;...")

# Reads the compile and link flags of the wrapper `cc` into
# <out>_INCLUDES, <out>_LIBRARIES (full paths) and <out>_LIBDIRS.
function(collie_mpi_wrapper_flags cc out)
  execute_process(COMMAND ${cc} -show OUTPUT_VARIABLE show RESULT_VARIABLE rc ERROR_QUIET
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0 OR show STREQUAL "")
    execute_process(COMMAND ${cc} --showme OUTPUT_VARIABLE show RESULT_VARIABLE rc ERROR_QUIET
                    OUTPUT_STRIP_TRAILING_WHITESPACE)
  endif()
  if(NOT rc EQUAL 0 OR show STREQUAL "")
    message(FATAL_ERROR "COLLIE_EXTRA_MPI: ${cc} answers neither -show nor --showme")
  endif()
  separate_arguments(args UNIX_COMMAND "${show}")
  set(includes "")
  set(dirs "")
  set(names "")
  foreach(a IN LISTS args)
    if(a MATCHES "^-I(.+)")
      list(APPEND includes "${CMAKE_MATCH_1}")
    elseif(a MATCHES "^-L(.+)")
      list(APPEND dirs "${CMAKE_MATCH_1}")
    elseif(a MATCHES "^-l(.+)")
      list(APPEND names "${CMAKE_MATCH_1}")
    endif()
  endforeach()
  set(libs "")
  foreach(n IN LISTS names)
    unset(lib CACHE)
    find_library(lib NAMES ${n} HINTS ${dirs} NO_CACHE)
    if(NOT lib)
      message(FATAL_ERROR "COLLIE_EXTRA_MPI: ${cc} links -l${n}, which is not in ${dirs}")
    endif()
    list(APPEND libs "${lib}")
  endforeach()
  set(${out}_INCLUDES "${includes}" PARENT_SCOPE)
  set(${out}_LIBRARIES "${libs}" PARENT_SCOPE)
  set(${out}_LIBDIRS "${dirs}" PARENT_SCOPE)
endfunction()

# collie-mpi-worker-<name> against the MPI of the wrapper `cc`; sets
# COLLIE_MPI_WORKER_<name>_LIBDIRS (where its libraries are, for tests that
# run an MPI unpacked outside the loader's path) and _CC (the wrapper).
function(collie_mpi_worker name cc)
  collie_mpi_wrapper_flags(${cc} w)
  add_library(collie_mpi_${name} STATIC ${PROJECT_SOURCE_DIR}/backends/mpi/mpi_dist.cpp)
  collie_target(collie_mpi_${name})
  target_include_directories(collie_mpi_${name} SYSTEM BEFORE PUBLIC ${w_INCLUDES})
  target_compile_definitions(collie_mpi_${name} PUBLIC OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
  target_link_libraries(collie_mpi_${name} PUBLIC collie_core collie_mpi_version ${w_LIBRARIES})
  add_executable(collie-mpi-worker-${name} ${PROJECT_SOURCE_DIR}/tools/mpi_worker.cpp)
  collie_target(collie-mpi-worker-${name})
  target_link_libraries(collie-mpi-worker-${name} PRIVATE collie_mpi_${name} collie_remote collie_bench_loop)
  if(TARGET collie)
    add_dependencies(collie collie-mpi-worker-${name})  # built with collie, found beside it
  endif()
  install(TARGETS collie-mpi-worker-${name} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  set(COLLIE_MPI_WORKER_${name}_LIBDIRS "${w_LIBDIRS}" PARENT_SCOPE)
  set(COLLIE_MPI_WORKER_${name}_CC "${cc}" PARENT_SCOPE)
  message(STATUS "collie: collie-mpi-worker-${name} against ${cc} (${w_LIBRARIES})")
endfunction()

set(collie_extra_mpi ${COLLIE_EXTRA_MPI})
if(NOT collie_extra_mpi MATCHES "(^|;)mpich=")
  find_program(COLLIE_MPICH_CC NAMES mpicc.mpich HINTS ENV COLLIE_MPICH_ROOT PATH_SUFFIXES bin usr/bin)
  if(COLLIE_MPICH_CC)
    list(APPEND collie_extra_mpi "mpich=${COLLIE_MPICH_CC}")
  endif()
endif()
foreach(entry IN LISTS collie_extra_mpi)
  if(NOT entry MATCHES "^([A-Za-z0-9_]+)=(.+)$")
    message(FATAL_ERROR "COLLIE_EXTRA_MPI: '${entry}' is not NAME=MPICC")
  endif()
  collie_mpi_worker(${CMAKE_MATCH_1} ${CMAKE_MATCH_2})
endforeach()
