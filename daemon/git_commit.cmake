# Writes OUT with `#define HOPRELAY_GIT_COMMIT "..."`: the commit of the source tree SRC
# (suffixed -dirty when it has uncommitted changes), or "unknown" outside a git checkout (a
# source tarball). Runs at every build; rewrites OUT only when the text changes, so an
# unchanged commit does not relink anything.
execute_process(COMMAND git -C "${SRC}" describe --always --dirty --abbrev=12
  OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR commit STREQUAL "")
  set(commit unknown)
endif()
set(text "#define HOPRELAY_GIT_COMMIT \"${commit}\"\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
