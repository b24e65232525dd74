# Run at build time (every build, by the target kl_version_source in cmake/version.cmake): writes OUT with
# the version and the git commit the tree is at, `git describe --always --dirty`, or "unknown" where SRC is
# not the top of a git checkout (a source tarball). configure_file leaves OUT untouched when nothing
# changed, so an unchanged commit recompiles and relinks nothing.
set(commit "unknown")
find_package(Git QUIET)
if(GIT_FOUND)
  execute_process(COMMAND ${GIT_EXECUTABLE} -C ${SRC} rev-parse --show-toplevel
    OUTPUT_VARIABLE top RESULT_VARIABLE rc_top OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(rc_top EQUAL 0)
    get_filename_component(top "${top}" REALPATH)
    get_filename_component(src "${SRC}" REALPATH)
  endif()
  if(rc_top EQUAL 0 AND top STREQUAL src)
    execute_process(COMMAND ${GIT_EXECUTABLE} -C ${SRC} describe --always --dirty
      OUTPUT_VARIABLE described RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(rc EQUAL 0 AND described)
      set(commit "${described}")
    endif()
  endif()
endif()
set(KL_VERSION_TEXT "kernel-ladder ${VERSION} (commit ${commit})")
file(WRITE ${OUT}.tmp
  "// Generated at build time by cmake/version_gen.cmake: do not edit.\n"
  "#include \"app/version.h\"\n\n"
  "namespace kl {\n"
  "const char* version_text() { return \"${KL_VERSION_TEXT}\"; }\n"
  "}  // namespace kl\n")
configure_file(${OUT}.tmp ${OUT} COPYONLY)
