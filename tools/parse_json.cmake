# Fails unless FILE parses as JSON with a traceEvents array (CMake's own parser).
file(READ ${FILE} text)
string(JSON n ERROR_VARIABLE err LENGTH "${text}" traceEvents)
if(err)
  message(FATAL_ERROR "${FILE} is not a valid trace: ${err}")
endif()
if(n LESS 5)
  message(FATAL_ERROR "${FILE} has only ${n} events")
endif()
