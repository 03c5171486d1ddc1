# Runs CMD (a ;-list) and fails unless it exits with RC and, when given, its
# output contains every entry of CONTAINS (a ;-list). With REQUIRES (mpi,
# torch (gloo), torch:NAME, or any backend `collie backends` lists) it first asks `collie
# backends` (CMD's first word is collie) whether that backend is available
# here; if not it prints "SKIPPED: <why>" and stops, which the test's
# SKIP_REGULAR_EXPRESSION turns into a visible skip. REQUIRES !NAME skips
# where NAME is available (a test of what happens without it).
# Runs of spaces in the output and in CONTAINS compare as one space.
# With TWICE it runs CMD again and fails unless stdout is the same bytes.
if(REQUIRES)
  list(GET CMD 0 collie)
  execute_process(COMMAND ${collie} backends OUTPUT_VARIABLE backends ERROR_VARIABLE backends_err)
  if(REQUIRES MATCHES "^torch(:(.*))?$")
    set(torch_backend "${CMAKE_MATCH_2}")
    if(NOT torch_backend)
      set(torch_backend gloo)
    endif()
    string(REGEX MATCH "torch:NAME\n[^\n]*\n[^\n]*\n    here: ([^\n]*)" m "${backends}")
    if(NOT CMAKE_MATCH_1 MATCHES "^torch .*${torch_backend} yes")
      message("SKIPPED: torch.distributed with ${torch_backend} is not available here: ${CMAKE_MATCH_1}")
      return()
    endif()
    # torch's nccl needs a GPU as well: the cuda backend says whether there is one.
    string(REGEX MATCH "(^|\n)cuda\n[^\n]*\n[^\n]*\n    not available here: ([^\n]*)" m "${backends}")
    if(torch_backend STREQUAL "nccl" AND m)
      message("SKIPPED: torch:nccl needs a GPU: ${CMAKE_MATCH_2}")
      return()
    endif()
  elseif(REQUIRES MATCHES "^!(.*)")
    set(absent "${CMAKE_MATCH_1}")
    string(REGEX MATCH "(^|\n)${absent}\n[^\n]*\n[^\n]*\n    not available here: ([^\n]*)" m "${backends}")
    if(NOT m)
      message("SKIPPED: backend ${absent} is available here; this test is of a machine without it")
      return()
    endif()
  else()
    string(REGEX MATCH "(^|\n)${REQUIRES}\n[^\n]*\n[^\n]*\n    not available here: ([^\n]*)" m "${backends}")
    if(m)
      message("SKIPPED: backend ${REQUIRES} is not available here: ${CMAKE_MATCH_2}")
      return()
    endif()
  endif()
endif()
execute_process(COMMAND ${CMD} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL RC)
  message(FATAL_ERROR "exit code ${rc}, expected ${RC}\n--- stdout:\n${out}\n--- stderr:\n${err}")
endif()
# Runs of spaces compare as one, so a table's padding (which follows its
# widest row) does not decide a test about its contents.
string(REGEX REPLACE "  +" " " squeezed "${out}${err}")
foreach(want IN LISTS CONTAINS)
  string(REGEX REPLACE "  +" " " want_squeezed "${want}")
  string(FIND "${squeezed}" "${want_squeezed}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "output lacks '${want}'\n--- stdout:\n${out}\n--- stderr:\n${err}")
  endif()
endforeach()
if(TWICE)
  execute_process(COMMAND ${CMD} RESULT_VARIABLE rc2 OUTPUT_VARIABLE out2 ERROR_VARIABLE err2)
  if(NOT out STREQUAL out2)
    message(FATAL_ERROR "a second run printed something else\n--- first:\n${out}\n--- second:\n${out2}")
  endif()
endif()
