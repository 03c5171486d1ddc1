# Runs EXE and fails unless its output's rank lines are EXPECTED's.
execute_process(COMMAND ${EXE} RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${EXE} exited with ${rc}:\n${out}")
endif()
string(REGEX MATCHALL "Rank[^\n]*" got "${out}")
file(READ ${EXPECTED} want_text)
string(REGEX MATCHALL "Rank[^\n]*" want "${want_text}")
# Ranks run concurrently: the interleaving of their lines depends on the seed,
# as it does for real processes, so compare the lines as a multiset.
list(SORT got)
list(SORT want)
if(NOT got STREQUAL want)
  message(FATAL_ERROR "output differs.\n--- got:\n${got}\n--- expected:\n${want}")
endif()
