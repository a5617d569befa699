# CPACK_POST_BUILD_SCRIPTS: runs fix-dbgsym.sh (beside this file) on the -dbgsym packages just
# built, where cpack built them (CPACK_TOPLEVEL_DIRECTORY), before it copies them out.
file(GLOB ddebs "${CPACK_TOPLEVEL_DIRECTORY}/*.ddeb")
if(ddebs)
  execute_process(COMMAND "${CMAKE_CURRENT_LIST_DIR}/fix-dbgsym.sh" ${ddebs} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "scripts/deb/fix-dbgsym.sh failed (${rc})")
  endif()
endif()
