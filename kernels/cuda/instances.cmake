# The cuda.unified kernel instances: one key per explicit instantiation, the only list of them. CMake generates one
# .cu per built key (generated/instance_<key>.cu) and the key -> launcher table (generated/instance_table.cpp) that
# unified.cpp dispatches through; a plan whose key is not built is declined as "no instance for <key>".
#   narrow/<dtype>/d<D>/w<W>r<RW>  2D mma.sync prefill, W warps x RW query rows (prefill_kernel.cuh)
#   wide/<dtype>/d<D>/wgs<WG>      2D wgmma prefill, WG consumer warpgroups (prefill_wide.cuh)
#   decode/<dtype>/d<D>            3D split-KV decode (decode_kernel.cuh)
#   .../feat                       with the attention features (feature_tile.cuh); a d128 key may then name an
#                                  8-bit K/V cache in <dtype>, <q-dtype>-<kv-dtype> (bf16-e4m3)
#   .../feat/q8                    wide and decode: Q in the cache's 8-bit codes too (the FP8 SDPA); <dtype> is O's;
#                                  the wide kernel's at head size 256 too
# Which keys a plan can ask for is decided by heuristics.cpp (instance_key); the host tests check the two agree.
set(ATTNBENCH_CUDA_INSTANCE_TABLE
  narrow/bf16/d64/w4r16   narrow/bf16/d64/w8r16   narrow/bf16/d64/w4r32
  narrow/bf16/d128/w4r16  narrow/bf16/d128/w8r16  narrow/bf16/d128/w4r32
  narrow/bf16/d256/w4r16  narrow/bf16/d256/w8r16
  narrow/fp16/d64/w4r16   narrow/fp16/d64/w8r16   narrow/fp16/d64/w4r32
  narrow/fp16/d128/w4r16  narrow/fp16/d128/w8r16  narrow/fp16/d128/w4r32
  narrow/fp16/d256/w4r16  narrow/fp16/d256/w8r16
  wide/bf16/d64/wgs1  wide/bf16/d64/wgs2  wide/bf16/d64/wgs3
  wide/bf16/d128/wgs1 wide/bf16/d128/wgs2
  wide/bf16/d256/wgs1 wide/bf16/d256/wgs2
  wide/fp16/d64/wgs1  wide/fp16/d64/wgs2  wide/fp16/d64/wgs3
  wide/fp16/d128/wgs1 wide/fp16/d128/wgs2
  wide/fp16/d256/wgs1 wide/fp16/d256/wgs2
  decode/bf16/d64 decode/bf16/d128 decode/bf16/d256
  decode/fp16/d64 decode/fp16/d128 decode/fp16/d256
  wide/bf16/d64/wgs2/feat wide/bf16/d128/wgs2/feat wide/bf16/d256/wgs2/feat
  wide/fp16/d64/wgs2/feat wide/fp16/d128/wgs2/feat wide/fp16/d256/wgs2/feat
  narrow/bf16/d64/w4r32/feat narrow/bf16/d128/w4r32/feat narrow/bf16/d256/w8r16/feat
  narrow/fp16/d64/w4r32/feat narrow/fp16/d128/w4r32/feat narrow/fp16/d256/w8r16/feat
  decode/bf16/d64/feat decode/bf16/d128/feat decode/bf16/d256/feat
  decode/fp16/d64/feat decode/fp16/d128/feat decode/fp16/d256/feat
  narrow/bf16-e4m3/d128/w4r32/feat narrow/bf16-e5m2/d128/w4r32/feat
  narrow/fp16-e4m3/d128/w4r32/feat narrow/fp16-e5m2/d128/w4r32/feat
  decode/bf16-e4m3/d128/feat decode/bf16-e5m2/d128/feat
  decode/fp16-e4m3/d128/feat decode/fp16-e5m2/d128/feat
  wide/bf16-e4m3/d128/wgs2/feat wide/bf16-e5m2/d128/wgs2/feat
  wide/fp16-e4m3/d128/wgs2/feat wide/fp16-e5m2/d128/wgs2/feat
  wide/bf16-e4m3/d128/wgs2/feat/q8 wide/bf16-e5m2/d128/wgs2/feat/q8
  wide/fp16-e4m3/d128/wgs2/feat/q8 wide/fp16-e5m2/d128/wgs2/feat/q8
  wide/bf16-e4m3/d256/wgs2/feat/q8 wide/bf16-e5m2/d256/wgs2/feat/q8
  wide/fp16-e4m3/d256/wgs2/feat/q8 wide/fp16-e5m2/d256/wgs2/feat/q8
  decode/bf16-e4m3/d128/feat/q8 decode/bf16-e5m2/d128/feat/q8
  decode/fp16-e4m3/d128/feat/q8 decode/fp16-e5m2/d128/feat/q8)

# "ci": a build without a GPU only needs the code to compile and the host tests to plan: every plain bf16 instance
# (the CPU suite plans bf16 problems) and, so each variant's other paths still compile (and stay within their
# registers), one fp16 instance of each, five 16-bit features instances (both d256 wide ones: their producer's budget
# is the tightest) and six of an 8-bit cache. A kernel change is built with "all" before it lands.
set(ATTNBENCH_CUDA_INSTANCES_CI
  narrow/bf16/d[0-9]+/w[0-9]+r[0-9]+ wide/bf16/d[0-9]+/wgs[0-9] decode/bf16/d[0-9]+
  narrow/fp16/d128/w4r32 wide/fp16/d64/wgs3 decode/fp16/d128
  wide/bf16/d128/wgs2/feat "wide/(bf16|fp16)/d256/wgs2/feat" narrow/bf16/d128/w4r32/feat decode/bf16/d256/feat
  narrow/fp16-e5m2/d128/w4r32/feat decode/bf16-e4m3/d128/feat wide/fp16-e4m3/d128/wgs2/feat
  wide/bf16-e5m2/d128/wgs2/feat/q8 decode/fp16-e4m3/d128/feat/q8
  wide/bf16-e4m3/d256/wgs2/feat/q8)

# Instances that spill registers (ptxas, nvcc 13.0), each with its reason (kernels/NOTES.md, the spill audits); under
# ATTNBENCH_SPILL_CHECK every other instance is compiled with ptxas's warnings, a spill among them, as errors, so a
# change that makes a kernel spill fails the build that compiles it (a listed file's other kernels are not held).
#   3-slot 8-bit decode with features: 28-40 B at the 128 registers of two CTAs per SM (8 reloads per 128-key tile)
set(ATTNBENCH_CUDA_INSTANCES_SPILLING
  "decode/(bf16|fp16)-(e4m3|e5m2)/d128/feat(/q8)?")

set(ATTNBENCH_CUDA_INSTANCES "all" CACHE STRING
    "cuda.unified instances to build: all, or a list (; or ,) of ci and regular expressions matched against whole keys")

# The table's keys, in table order, that some expression of `patterns` (a list; spaces around each dropped) matches
# whole; an expression that matches none is an error naming `what`.
function(attnbench_keys_matching patterns what out)
  set(picked "")
  foreach(pattern IN LISTS patterns)
    string(STRIP "${pattern}" pattern)
    set(matched FALSE)
    foreach(key IN LISTS ATTNBENCH_CUDA_INSTANCE_TABLE)
      if(key MATCHES "^(${pattern})$")
        list(APPEND picked ${key})
        set(matched TRUE)
      endif()
    endforeach()
    if(NOT matched)
      message(FATAL_ERROR "${what}: '${pattern}' matches no key of instances.cmake")
    endif()
  endforeach()
  set(keys "")
  foreach(key IN LISTS ATTNBENCH_CUDA_INSTANCE_TABLE)
    if(key IN_LIST picked)
      list(APPEND keys ${key})
    endif()
  endforeach()
  set(${out} ${keys} PARENT_SCOPE)
endfunction()

# The keys of `selection` (all, or a list of regexes and ci, the CI subset; empty elements skipped), in table order;
# an expression that matches no key is an error.
function(attnbench_select_instances selection out)
  if(selection STREQUAL "all")
    set(${out} ${ATTNBENCH_CUDA_INSTANCE_TABLE} PARENT_SCOPE)
    return()
  endif()
  string(REPLACE "," ";" elements "${selection}")
  set(patterns "")
  foreach(element IN LISTS elements)
    string(STRIP "${element}" element)
    if(element STREQUAL "ci")
      list(APPEND patterns ${ATTNBENCH_CUDA_INSTANCES_CI})
    elseif(NOT element STREQUAL "")
      list(APPEND patterns "${element}")
    endif()
  endforeach()
  if(NOT patterns)
    message(FATAL_ERROR "ATTNBENCH_CUDA_INSTANCES='${selection}' names no expression")
  endif()
  attnbench_keys_matching("${patterns}" ATTNBENCH_CUDA_INSTANCES keys)  # each expression matches a key
  set(${out} ${keys} PARENT_SCOPE)
endfunction()

# One key's generated parts: the umbrella header, the instantiation macro call and the table entry.
function(attnbench_instance_parts key header_out inst_out entry_out)
  set(q8 false)  # the /q8 suffix apart: the pattern below already uses CMake's 9 capture groups
  string(REGEX REPLACE "/q8$" "" stem "${key}")
  if(NOT stem STREQUAL key)
    set(q8 true)
  endif()
  if(NOT stem MATCHES "^(narrow|wide|decode)/(bf16|fp16)(-e4m3|-e5m2)?/d([0-9]+)(/w([0-9]+)r([0-9]+)|/wgs([0-9]+))?(/feat)?$")
    message(FATAL_ERROR "instances.cmake: malformed key '${key}'")
  endif()
  set(variant ${CMAKE_MATCH_1})
  string(REPLACE "-" "" kv8 "${CMAKE_MATCH_3}")
  set(d ${CMAKE_MATCH_4})
  set(w "${CMAKE_MATCH_6}")
  set(rw "${CMAKE_MATCH_7}")
  set(wg "${CMAKE_MATCH_8}")
  set(feat_suffix "${CMAKE_MATCH_9}")
  set(dt DType::bf16)
  if(CMAKE_MATCH_2 STREQUAL "fp16")
    set(dt DType::f16)
  endif()
  set(kv ${dt})
  if(NOT kv8 STREQUAL "")
    set(kv DType::${kv8})
  endif()
  set(feat false)
  if(feat_suffix STREQUAL "/feat")
    set(feat true)
  endif()
  if(NOT kv8 STREQUAL "" AND (NOT feat OR NOT (d STREQUAL "128" OR (q8 AND variant STREQUAL "wide" AND d STREQUAL "256"))))
    message(FATAL_ERROR "instances.cmake: key '${key}': an 8-bit K/V cache needs /feat and head size 128 (256: the wide FP8 SDPA)")
  endif()
  if(q8 AND (kv8 STREQUAL "" OR variant STREQUAL "narrow"))
    message(FATAL_ERROR "instances.cmake: key '${key}': an 8-bit Q (/q8) needs an 8-bit cache and the wide or decode kernel")
  endif()
  set(key_init "InstanceVariant::${variant}, ${dt}, ${d}")
  if(variant STREQUAL "narrow" AND NOT w STREQUAL "")
    set(header prefill_kernel.cuh)
    set(args "${dt}, ${d}, ${w}, ${rw}, ${kv}, ${feat}")
    set(inst "ATTNBENCH_INSTANTIATE_PREFILL_RW(${args})")
    set(entry "{\"${key}\", {${key_init}, ${w}, ${rw}, 0, ${kv}, ${feat}}, &launch_prefill<${args}>, nullptr}")
  elseif(variant STREQUAL "wide" AND NOT wg STREQUAL "")
    set(header prefill_wide.cuh)
    set(args "${dt}, ${d}, ${wg}, ${kv}, ${feat}, ${q8}")
    set(inst "ATTNBENCH_INSTANTIATE_PREFILL_WIDE_WG(${args})")
    set(entry "{\"${key}\", {${key_init}, 0, 0, ${wg}, ${kv}, ${feat}, ${q8}}, nullptr, &launch_prefill_wide<${args}>}")
  elseif(variant STREQUAL "decode" AND w STREQUAL "" AND wg STREQUAL "")
    set(header decode_kernel.cuh)
    set(args "${dt}, ${d}, ${kv}, ${feat}, ${q8}")
    set(inst "ATTNBENCH_INSTANTIATE_DECODE(${args})")
    set(entry "{\"${key}\", {${key_init}, 0, 0, 0, ${kv}, ${feat}, ${q8}}, &launch_decode<${args}>, nullptr}")
  else()
    message(FATAL_ERROR "instances.cmake: key '${key}' does not fit its variant")
  endif()
  set(${header_out} ${header} PARENT_SCOPE)
  set(${inst_out} "${inst}" PARENT_SCOPE)
  set(${entry_out} "${entry}" PARENT_SCOPE)
endfunction()

# Writes the .cu of every key in `keys` and the table (built from `selection`) into `dir`, rewritten only when
# their text changes so a reconfigure recompiles nothing; `out` gets the sources. The .cu of a key left out later
# stays in `dir`, unbuilt, so switching the selection back recompiles nothing either.
function(attnbench_generate_instances selection keys dir out)
  file(MAKE_DIRECTORY ${dir})
  attnbench_keys_matching("${ATTNBENCH_CUDA_INSTANCES_SPILLING}" ATTNBENCH_CUDA_INSTANCES_SPILLING spilling)
  set(sources "")
  set(entries "")
  foreach(key IN LISTS keys)
    attnbench_instance_parts(${key} header inst entry)
    string(REPLACE "/" "_" stem "${key}")
    set(cu ${dir}/instance_${stem}.cu)
    file(CONFIGURE OUTPUT ${cu} @ONLY CONTENT
"// Generated by kernels/cuda/instances.cmake: the instance ${key}.
#include \"cuda/${header}\"

namespace attnbench::cuda {
${inst}
}  // namespace attnbench::cuda
")
    list(APPEND sources ${cu})
    string(APPEND entries "    ${entry},\n")
    if(ATTNBENCH_SPILL_CHECK)  # the listed ones warn (their spills stay visible), the others fail
      set(check "-Xptxas=-warn-spills,-Werror")
      if(key IN_LIST spilling)
        set(check "-Xptxas=-warn-spills")
      endif()
      set_property(SOURCE ${cu} APPEND PROPERTY COMPILE_OPTIONS ${check})
    endif()
  endforeach()
  list(LENGTH keys count)
  string(REPLACE "\\" "\\\\" selection_literal "${selection}")
  string(REPLACE "\"" "\\\"" selection_literal "${selection_literal}")
  set(table ${dir}/instance_table.cpp)
  file(CONFIGURE OUTPUT ${table} @ONLY CONTENT
"// Generated by kernels/cuda/instances.cmake: this build's ${count} instances, key -> launcher.
#include \"cuda/launch.hpp\"

namespace attnbench::cuda {

InstanceTable built_instances() {
  static const InstanceLauncher table[] = {
${entries}  };
  return {table, table + sizeof(table) / sizeof(table[0])};
}

const char* built_instance_selection() { return \"${selection_literal}\"; }

}  // namespace attnbench::cuda
")
  set(${out} ${sources} ${table} PARENT_SCOPE)
endfunction()
