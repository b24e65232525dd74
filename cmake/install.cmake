# What `cmake --install build --prefix P` puts under P, and nothing else:
#   bin/kernel-ladder                                    (fonts, shaders, texts, sources are embedded in it)
#   share/applications/kernel-ladder.desktop             (Exec= the installed binary's absolute path)
#   share/icons/hicolor/{48x48,128x128,256x256}/apps/kernel-ladder.png, scalable/apps/kernel-ladder.svg
# and `cpack -G DEB` in the build tree: a .deb of the same files whose Depends are computed by
# dpkg-shlibdeps from the libraries the binary links (no list written here).
include(GNUInstallDirs)

# libepoxy and GLFW open the GL libraries themselves (dlopen), so the linker would drop them as unused and
# dpkg-shlibdeps would not see them: name them as needed, so that the .deb depends on the GL dispatch
# libraries (libegl1, libopengl0: GLVND, which pull in Mesa or the NVIDIA driver's vendor library).
target_link_libraries(kernel-ladder PRIVATE
  "-Wl,--push-state,--no-as-needed" OpenGL::EGL OpenGL::OpenGL "-Wl,--pop-state")

install(TARGETS kernel-ladder RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# The desktop entry is written at install time so that Exec names the prefix given to --prefix (or /usr in
# the .deb), not the one cmake was configured with.
install(CODE "
  set(KL_EXEC \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/kernel-ladder\")
  string(MD5 kl_prefix_hash \"\${CMAKE_INSTALL_PREFIX}\")
  set(kl_desktop \"${PROJECT_BINARY_DIR}/install/\${kl_prefix_hash}/kernel-ladder.desktop\")
  configure_file(\"${PROJECT_SOURCE_DIR}/assets/kernel-ladder.desktop.in\" \"\${kl_desktop}\" @ONLY)
  file(INSTALL DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_DATADIR}/applications\" TYPE FILE
       FILES \"\${kl_desktop}\")
")

foreach(px IN LISTS KL_ICON_SIZES)
  install(FILES ${KL_ICON_PNG_${px}} RENAME kernel-ladder.png
          DESTINATION ${CMAKE_INSTALL_DATADIR}/icons/hicolor/${px}x${px}/apps)
endforeach()
install(FILES ${KL_ICON_SVG} DESTINATION ${CMAKE_INSTALL_DATADIR}/icons/hicolor/scalable/apps)

# ---- the .deb ------------------------------------------------------------------------------------------
set(KL_PACKAGE_CONTACT "Kernel Ladder maintainers <maintainers@kernel-ladder.invalid>"
    CACHE STRING "The .deb's Maintainer field")
set(CPACK_PACKAGE_NAME kernel-ladder)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${KL_PACKAGE_CONTACT}")
set(CPACK_PACKAGE_VENDOR "Kernel Ladder")
if(KL_HAS_CUDA)
  set(KL_PACKAGE_FLAVOUR "CUDA backend for sm_${CMAKE_CUDA_ARCHITECTURES}, CPU backend where there is no GPU")
else()
  set(KL_PACKAGE_FLAVOUR "CPU backend only")
endif()
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "visual explorer for GPU kernels (${KL_PACKAGE_FLAVOUR})")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "Launches real kernels (vector add, fused ReLU + dropout, softmax, \
attention, FlashAttention) and shows what they do, rung by rung, each picture drawn from a trace the kernel \
recorded.")
if(KL_HAS_CUDA)
  string(APPEND CPACK_DEBIAN_PACKAGE_DESCRIPTION "\nThe CUDA runtime is linked statically: a GPU needs only the NVIDIA \
driver. cuBLAS (libcublas.so.${CUDAToolkit_VERSION_MAJOR}) is loaded when the Measure view measures its GEMM ceiling.")
endif()
set(CPACK_DEBIAN_PACKAGE_SECTION education)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Edited kernels (kernels/editable) are compiled at run time by the system C++ compiler on the CPU backend.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "g++")
# Install into the staging root with DESTDIR and the real prefix, so the desktop entry's Exec reads
# /usr/bin/kernel-ladder and not the staging path.
set(CPACK_SET_DESTDIR ON)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_GENERATOR DEB)
include(CPack)
