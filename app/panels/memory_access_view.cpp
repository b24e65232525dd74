#include "app/panels/memory_access_view.h"

#include <imgui.h>

#include <map>

#include "app/ui.h"
#include "kernels/studies/memory_access.h"

namespace kl::app {
namespace {

struct Cached {
  std::string key;
  study::memory_access::Summary summary;
  std::string failure;  // a failure (not a refusal) while counting: shown, and counted, once
};

}  // namespace

void draw_memory_access(Backend b, const std::string& panel, const ParamValues& settings) {
  static std::map<std::string, Cached> cache;  // by panel id; the UI thread only
  std::string key = ui::settings_key(settings, {}, b);  // the backend and the edited kernel
  for (const ParamSpec& s : settings.specs()) key += "/" + settings.get_text(s.name);
  Cached& c = cache[panel];
  if (c.key != key) {
    c.key = key;
    c.failure.clear();
    try {
      c.summary = study::memory_access::summarize(panel, b, settings);
    } catch (const std::exception& e) {
      c.summary = {};
      c.failure = "sectors per request: " + ui::error_text(e);
    }
  }
  ui::error_box(c.failure);
  const study::memory_access::Summary& s = c.summary;
  const unsigned muted = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  if (!s.line.empty()) ui::wrapped_colored(muted, "Memory, " + s.line + " (4 = 32 floats coalesced; rung 1½)");
  else if (!s.error.empty()) ui::wrapped_colored(muted, "Memory, sectors per request: not counted: " + s.error);
  if (!s.tma.empty()) ui::wrapped_colored(muted, s.tma);
}

}  // namespace kl::app
