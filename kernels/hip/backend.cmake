# The HIP backend (ATTNBENCH_HIP_BUILD, cmake/hip.cmake): the generated kernel instances compiled for
# ATTNBENCH_HIP_ARCHITECTURES by the HIP compiler, the host side (runtime shim, hip.unified) by the host compiler
# against the HIP headers, linked to libamdhip64. Also the compiler's resource report of every instance on gfx942
# (-Rpass-analysis=kernel-resource-usage), which tests/hip checks against the budget model.
include(${CMAKE_CURRENT_LIST_DIR}/instances.cmake)
set(_hip_gen ${CMAKE_CURRENT_BINARY_DIR}/generated)
attnbench_hip_generate_instances(${_hip_gen} HIP_INSTANCE_SOURCES HIP_INSTANCE_TABLE_SOURCE)
list(LENGTH HIP_INSTANCE_SOURCES _hip_count)
message(STATUS "hip.unified instances: ${_hip_count}")

set(_hip_includes ${CMAKE_CURRENT_SOURCE_DIR}/.. ${CMAKE_CURRENT_SOURCE_DIR}/../include)
add_library(attnbench_hip_instances OBJECT ${HIP_INSTANCE_SOURCES} timing.hip)
target_include_directories(attnbench_hip_instances PRIVATE ${_hip_includes})
target_compile_options(attnbench_hip_instances PRIVATE -Wall -Wextra)

find_library(ATTNBENCH_AMDHIP64 NAMES amdhip64 PATHS ${ATTNBENCH_HIP_ROOT}/lib REQUIRED)
add_library(attnbench_hip STATIC unified.cpp runtime.cpp ../common/gpu_buffer.cpp ${HIP_INSTANCE_TABLE_SOURCE}
                                 $<TARGET_OBJECTS:attnbench_hip_instances>)
target_include_directories(attnbench_hip PUBLIC ${_hip_includes})
# The HIP headers for the host compiler: Debian's are in /usr/include already (adding it would break libstdc++'s
# #include_next); a ROCm install's are under its root.
get_filename_component(_hip_inc "${ATTNBENCH_HIP_ROOT}/include" REALPATH)
if(NOT _hip_inc STREQUAL "/usr/include")
  target_include_directories(attnbench_hip SYSTEM PRIVATE ${_hip_inc})
endif()
target_compile_definitions(attnbench_hip PRIVATE __HIP_PLATFORM_AMD__ PUBLIC ATTNBENCH_WITH_HIP=1)
target_link_libraries(attnbench_hip PUBLIC attnbench_hip_host attnbench_api ${ATTNBENCH_AMDHIP64})
set_target_properties(attnbench_hip PROPERTIES LINKER_LANGUAGE CXX)

# gfx942's resource report per instance: a device-only compile of each instance file, its remarks kept.
separate_arguments(_hip_flags UNIX_COMMAND "${CMAKE_HIP_FLAGS}")
set(_hip_remarks "")
file(GLOB _hip_headers CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.hpp ${CMAKE_CURRENT_SOURCE_DIR}/device/*.hpp
     ${CMAKE_CURRENT_SOURCE_DIR}/../common/device/*.hpp)
set(_hip_report_args ${_hip_flags} -std=c++17 -O3 -x hip --offload-arch=gfx942 --offload-device-only -c -o /dev/null
                     -Rpass-analysis=kernel-resource-usage -I${CMAKE_CURRENT_SOURCE_DIR}/..
                     -I${CMAKE_CURRENT_SOURCE_DIR}/../include)
foreach(src IN LISTS HIP_INSTANCE_SOURCES)
  get_filename_component(stem ${src} NAME_WE)
  set(out ${_hip_gen}/${stem}.gfx942.remarks)
  add_custom_command(OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DCOMPILER=${CMAKE_HIP_COMPILER} "-DARGS=${_hip_report_args};${src}"
            -DOUT=${out} -P ${CMAKE_SOURCE_DIR}/cmake/capture-stderr.cmake
    DEPENDS ${src} ${_hip_headers} ${CMAKE_SOURCE_DIR}/cmake/capture-stderr.cmake
    COMMENT "gfx942 resource usage of ${stem}" VERBATIM)
  list(APPEND _hip_remarks ${out})
endforeach()
add_custom_target(attnbench_hip_resource_report DEPENDS ${_hip_remarks})
set(ATTNBENCH_HIP_REMARKS "${_hip_remarks}" CACHE INTERNAL "the gfx942 resource reports of the instances")
set(ATTNBENCH_HIP_INSTANCE_COUNT ${_hip_count} CACHE INTERNAL "the hip.unified instances built")
