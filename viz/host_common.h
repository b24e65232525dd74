// Internal to viz/: what the two render hosts share (ImGui context, style, fonts). Not for panels.
#pragma once
#include <cstdint>
#include <string>

namespace kl::viz::detail {

// Creates the ImGui context with the project's dark style and the embedded DejaVu fonts.
// `ini_path` empty: no layout file. Throws RuntimeError when a font is missing.
void create_imgui_context(const std::string& ini_path);
// Rebuilds the fonts (rasterised at the new size) and the scaled style when set_ui_scale() asked for
// another scale; the hosts call it between frames, before ImGui::NewFrame(). With the GL backend
// initialised, the font texture is uploaded again.
void apply_pending_ui_scale(bool gl_backend_ready);
// Destroys it again (after the backends have been shut down).
void destroy_imgui_context();

// Which GL context is live: a number that changes with every render host, 0 while there is none.
// Objects owning GL names (DataTexture, Heatmap) record it when they create them, and delete them
// only while the same context is still live: a panel that outlives its host must not call GL with
// no current context (epoxy aborts), and a name from a dead context means nothing in a new one.
uint64_t gl_context_generation();
void set_gl_context_live(bool live);  // the hosts call this after creating / before destroying it

// Headless host: whether an EGL client-extension string offers the EGL device platform, which needs
// device enumeration (EGL_EXT_device_enumeration, or EGL_EXT_device_base, the older name that NVIDIA's
// EGL advertises instead) and EGL_EXT_platform_device. When it does not, *missing names what is absent.
bool egl_offers_device_platform(const char* client_extensions, std::string* missing);

}  // namespace kl::viz::detail
