# Every csrc/kernels/*.cc is compiled once per ISA tier into namespace msv0::<isa> (its
# MSV0_EXPORT fills that tier's slot), and once more with MSV0_ONCE for its Python binding
# (that pass is part of the _core target). Only these objects are built with ISA flags.
file(GLOB MSV0_KERNEL_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/csrc/kernels/*.cc)
set(MSV0_KERNEL_OBJECTS)

function(msv0_isa_pass isa index)
  add_library(msv0_kernels_${isa} OBJECT ${MSV0_KERNEL_SOURCES})
  target_include_directories(msv0_kernels_${isa} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/csrc)
  target_compile_definitions(msv0_kernels_${isa} PRIVATE MSV0_ISA=${isa} MSV0_ISA_INDEX=${index})
  target_compile_options(msv0_kernels_${isa} PRIVATE ${ARGN})
  set(MSV0_KERNEL_OBJECTS ${MSV0_KERNEL_OBJECTS} $<TARGET_OBJECTS:msv0_kernels_${isa}> PARENT_SCOPE)
endfunction()

# Tier indices must match enum Isa in csrc/runtime/dispatch.h.
msv0_isa_pass(scalar 0)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  msv0_isa_pass(avx2 1 -mavx2 -mfma -mf16c)
  msv0_isa_pass(avx512 2 -mavx512f -mavx512bw -mavx512dq -mavx512vl -mfma -mf16c)
  msv0_isa_pass(avx512vnni 3 -mavx512f -mavx512bw -mavx512dq -mavx512vl -mavx512vnni -mfma -mf16c)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64|ARM64)$")
  msv0_isa_pass(neon 1)
  msv0_isa_pass(neondot 2 -march=armv8.2-a+dotprod)
endif()
