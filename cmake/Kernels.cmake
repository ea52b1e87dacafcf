# Every csrc/kernels/*.cc is compiled once per ISA tier into namespace msv0::<isa> (its
# MSV0_EXPORT fills that tier's slot), and once more with MSV0_ONCE for its Python binding
# (that pass is part of the _core target). Only these objects are built with ISA flags.
file(GLOB MSV0_KERNEL_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/csrc/kernels/*.cc)
set(MSV0_KERNEL_OBJECTS)

if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(MSV0_ARCH x86_64)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64|ARM64)$")
  set(MSV0_ARCH aarch64)
else()
  set(MSV0_ARCH none)  # only the `any` rows (scalar)
endif()

# The tiers come from csrc/runtime/isa_tiers.def; a row's index is its position among the rows
# this architecture builds, as enum Isa counts them in dispatch.h.
set(MSV0_TIER_TABLE ${CMAKE_CURRENT_SOURCE_DIR}/csrc/runtime/isa_tiers.def)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${MSV0_TIER_TABLE})
set(MSV0_TIER_ROW "^MSV0_TIER\\(([a-z0-9_]+), *([a-z0-9_]+), *\"([^\"]*)\", *(.*)\\)$")
file(STRINGS ${MSV0_TIER_TABLE} MSV0_TIER_ROWS REGEX "^MSV0_TIER\\(")
# MSV0_TIERS, when set, names the tiers to build; the others' slots stay empty and dispatch
# falls back to the next tier down (dispatch.h). Only for quicker instrumented builds
# (scripts/sanitize.sh); wheels build every tier.
set(MSV0_TIERS "" CACHE STRING "ISA tiers to build (default: all); scalar is always built")
set(MSV0_TIER_INDEX 0)
foreach(row IN LISTS MSV0_TIER_ROWS)
  if(NOT row MATCHES "${MSV0_TIER_ROW}")
    message(FATAL_ERROR "isa_tiers.def: cannot parse row: ${row}")
  endif()
  set(isa ${CMAKE_MATCH_1})
  set(arch ${CMAKE_MATCH_2})
  separate_arguments(flags UNIX_COMMAND "${CMAKE_MATCH_3}")
  if(arch STREQUAL "any" OR arch STREQUAL MSV0_ARCH)
    if(NOT MSV0_TIERS OR isa IN_LIST MSV0_TIERS OR isa STREQUAL "scalar")
      add_library(msv0_kernels_${isa} OBJECT ${MSV0_KERNEL_SOURCES})
      target_include_directories(msv0_kernels_${isa} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/csrc)
      target_compile_definitions(msv0_kernels_${isa} PRIVATE MSV0_ISA=${isa} MSV0_ISA_INDEX=${MSV0_TIER_INDEX})
      target_compile_options(msv0_kernels_${isa} PRIVATE ${flags})
      list(APPEND MSV0_KERNEL_OBJECTS $<TARGET_OBJECTS:msv0_kernels_${isa}>)
    endif()
    math(EXPR MSV0_TIER_INDEX "${MSV0_TIER_INDEX} + 1")
  endif()
endforeach()
