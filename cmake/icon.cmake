# The icon's PNGs (48, 128, 256 px), made at build time from assets/icon/kernel-ladder.svg by rsvg-convert
# (Debian's librsvg2-bin): nothing generated is checked in. Sets KL_ICON_SVG and KL_ICON_PNG_<px>; the
# target kl_icons makes them. The window embeds the 48 and 128 px images (cmake/embed.cmake); the install
# rules (cmake/install.cmake) put all of them in share/icons/hicolor.
# A build machine that cannot install librsvg2-bin (the GPU machine reaches no package registry) can name
# a folder with kernel-ladder-48.png, -128.png and -256.png drawn from the same SVG on another machine.
set(KL_ICON_PNG_DIR "" CACHE PATH "folder of kernel-ladder-{48,128,256}.png made elsewhere (no rsvg-convert here)")
find_program(KL_RSVG_CONVERT rsvg-convert)
if(NOT KL_RSVG_CONVERT AND NOT KL_ICON_PNG_DIR)
  message(FATAL_ERROR "rsvg-convert not found: it draws the icon's PNGs from its SVG at build time "
                      "(apt-get install librsvg2-bin; ./ladder.sh installs it)")
endif()
set(KL_ICON_SVG ${PROJECT_SOURCE_DIR}/assets/icon/kernel-ladder.svg)
set(KL_ICON_SIZES 48 128 256)
set(_kl_icon_pngs "")
foreach(px IN LISTS KL_ICON_SIZES)
  set(KL_ICON_PNG_${px} ${PROJECT_BINARY_DIR}/icon/kernel-ladder-${px}.png)
  if(KL_RSVG_CONVERT)
    set(_draw ${KL_RSVG_CONVERT} -w ${px} -h ${px} -o ${KL_ICON_PNG_${px}} ${KL_ICON_SVG})
  else()
    set(_draw ${CMAKE_COMMAND} -E copy ${KL_ICON_PNG_DIR}/kernel-ladder-${px}.png ${KL_ICON_PNG_${px}})
  endif()
  add_custom_command(OUTPUT ${KL_ICON_PNG_${px}}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/icon
    COMMAND ${_draw}
    DEPENDS ${KL_ICON_SVG}
    COMMENT "Drawing the ${px} px icon from its SVG"
    VERBATIM)
  list(APPEND _kl_icon_pngs ${KL_ICON_PNG_${px}})
endforeach()
add_custom_target(kl_icons ALL DEPENDS ${_kl_icon_pngs})
