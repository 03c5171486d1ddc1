# Runs CMD (a ;-list) and fails unless it exits with RC and, when given, its
# output contains every entry of CONTAINS (a ;-list).
execute_process(COMMAND ${CMD} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL RC)
  message(FATAL_ERROR "exit code ${rc}, expected ${RC}\n--- stdout:\n${out}\n--- stderr:\n${err}")
endif()
foreach(want IN LISTS CONTAINS)
  string(FIND "${out}${err}" "${want}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "output lacks '${want}'\n--- stdout:\n${out}\n--- stderr:\n${err}")
  endif()
endforeach()
