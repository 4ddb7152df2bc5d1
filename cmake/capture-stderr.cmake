# cmake -DCOMPILER=... -DARGS=a;b;c -DOUT=file -P capture-stderr.cmake: runs the compiler, writes its stderr (the
# remarks) to OUT, fails when it fails.
execute_process(COMMAND ${COMPILER} ${ARGS} RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${COMPILER} failed (${rc}):\n${err}")
endif()
file(WRITE ${OUT} "${err}")
