# The "hip-lang" package CMake's enable_language(HIP) loads from <ROCm root>/lib/cmake/hip-lang, for the ROCm root
# cmake/make-rocm-root.sh builds over Debian's packages. Debian's own copy adds -isystem /usr/include, which
# breaks libstdc++'s #include_next <math.h> in CMake's HIP ABI probe; this one names libamdhip64 and --hip-link
# only (clang adds the HIP headers itself from --rocm-path).
if(NOT TARGET hip-lang::device)
  find_library(_hip_lang_amdhip64 NAMES amdhip64 REQUIRED NO_CACHE PATHS /usr/lib/x86_64-linux-gnu)
  add_library(hip-lang::amdhip64 SHARED IMPORTED)
  set_target_properties(hip-lang::amdhip64 PROPERTIES IMPORTED_LOCATION "${_hip_lang_amdhip64}")
  add_library(hip-lang::host INTERFACE IMPORTED)
  set_target_properties(hip-lang::host PROPERTIES INTERFACE_LINK_LIBRARIES hip-lang::amdhip64)
  add_library(hip-lang::device INTERFACE IMPORTED)
  set_target_properties(hip-lang::device PROPERTIES
    INTERFACE_LINK_LIBRARIES hip-lang::host
    INTERFACE_COMPILE_DEFINITIONS "$<$<COMPILE_LANGUAGE:HIP>:__HIP_ROCclr__=1>"
    INTERFACE_LINK_OPTIONS "$<$<LINK_LANGUAGE:HIP>:--hip-link>")
endif()
set(_CMAKE_HIP_DEVICE_RUNTIME_TARGET "hip-lang::device")
set(hip-lang_FOUND TRUE)
