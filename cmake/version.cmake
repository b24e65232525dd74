# `kernel-ladder --version`: the project's version and the git commit it was built from. The commit is read
# at build time, not configure time (the target below runs every build and rewrites the source only when
# the commit or the dirty state changed), so a new HEAD shows without re-running cmake.
set(KL_VERSION_CPP ${PROJECT_BINARY_DIR}/generated/kl_version.cpp)
add_custom_target(kl_version_source
  COMMAND ${CMAKE_COMMAND} -DSRC=${PROJECT_SOURCE_DIR} -DOUT=${KL_VERSION_CPP} -DVERSION=${PROJECT_VERSION}
          -P ${PROJECT_SOURCE_DIR}/cmake/version_gen.cmake
  BYPRODUCTS ${KL_VERSION_CPP}
  COMMENT "Reading the git commit for --version"
  VERBATIM)
add_library(kl_version STATIC ${KL_VERSION_CPP})
target_include_directories(kl_version PUBLIC ${PROJECT_SOURCE_DIR})
add_dependencies(kl_version kl_version_source)
