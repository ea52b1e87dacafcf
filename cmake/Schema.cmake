# Code generated from schema/*.fbs at build time, never committed.
# C++: the verifier and readers for csrc/model, with each table's field types (--reflect-types),
# which read any op's attributes in one loop. Python: msv0/fb, from a copy of the schema whose
# namespace is rewritten to msv0.fb (generated Python imports its namespace as a package path;
# the namespace does not change a byte of the files it reads or writes).
# model_v0 and ops_v0 are r1.1's, byte for byte; type_id names the numbers its dataType fields hold.
set(MSV0_SCHEMAS ${CMAKE_CURRENT_SOURCE_DIR}/schema/model_v0.fbs ${CMAKE_CURRENT_SOURCE_DIR}/schema/ops_v0.fbs
                 ${CMAKE_CURRENT_SOURCE_DIR}/schema/type_id.fbs)
set(MSV0_GEN_DIR ${CMAKE_CURRENT_BINARY_DIR}/generated)
add_custom_command(
  OUTPUT ${MSV0_GEN_DIR}/model_v0_generated.h ${MSV0_GEN_DIR}/ops_v0_generated.h ${MSV0_GEN_DIR}/type_id_generated.h
  COMMAND ${CMAKE_COMMAND} -E make_directory ${MSV0_GEN_DIR}
  COMMAND ${FLATC_EXECUTABLE} --cpp --scoped-enums --reflect-types --no-warnings -o ${MSV0_GEN_DIR} ${MSV0_SCHEMAS}
  DEPENDS ${MSV0_SCHEMAS}
  COMMENT "flatc --cpp" VERBATIM)
add_custom_target(msv0_fbs_cpp DEPENDS ${MSV0_GEN_DIR}/model_v0_generated.h ${MSV0_GEN_DIR}/ops_v0_generated.h
                                       ${MSV0_GEN_DIR}/type_id_generated.h)

set(MSV0_PYGEN_DIR ${CMAKE_CURRENT_BINARY_DIR}/pygen)
set(MSV0_PYGEN_STAMP ${MSV0_PYGEN_DIR}/msv0/fb/MetaGraph.py)
add_custom_command(
  OUTPUT ${MSV0_PYGEN_STAMP}
  COMMAND ${CMAKE_COMMAND} -DSRC_DIR=${CMAKE_CURRENT_SOURCE_DIR}/schema -DOUT_DIR=${MSV0_PYGEN_DIR}
          -DFLATC=${FLATC_EXECUTABLE} -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/GenPython.cmake
  DEPENDS ${MSV0_SCHEMAS} ${CMAKE_CURRENT_SOURCE_DIR}/cmake/GenPython.cmake
  COMMENT "flatc --python (namespace msv0.fb)" VERBATIM)
add_custom_target(msv0_fbs_python ALL DEPENDS ${MSV0_PYGEN_STAMP})
install(DIRECTORY ${MSV0_PYGEN_DIR}/msv0/fb DESTINATION msv0)
