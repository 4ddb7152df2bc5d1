# CTest plugin_example_standalone: examples/plugin configured and built on its own (as a user would, outside
# attnbench's build), then loaded by attnbench. -D SOURCE, BINARY, GENERATOR, C_COMPILER, ATTNBENCH.
file(REMOVE_RECURSE "${BINARY}")
execute_process(COMMAND "${CMAKE_COMMAND}" -S "${SOURCE}" -B "${BINARY}" -G "${GENERATOR}"
                        "-DCMAKE_C_COMPILER=${C_COMPILER}" RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring ${SOURCE} failed (${rc})")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" --build "${BINARY}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building ${SOURCE} failed (${rc})")
endif()
execute_process(COMMAND "${ATTNBENCH}" list --kernels --plugin "${BINARY}/libattnbench_example_plugin.so"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "example\\.naive +cpu +attention")
  message(FATAL_ERROR "attnbench did not list the standalone build's kernel (exit ${rc}):\n${out}${err}")
endif()
