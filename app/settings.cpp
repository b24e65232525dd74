#include "app/settings.h"

#include <imgui.h>
#include <imgui_internal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "app/editor/persist.h"
#include "kernels/runtime/errors.h"

namespace kl::app {
namespace {

constexpr const char* kType = "KernelLadder";

// The handler's data lives here, not in the SettingsPersistence object: ImGui calls the write function
// when its context is destroyed, after the panels (and the window's locals) are gone.
struct Store {
  std::vector<std::string> lines;  // written on the next save
  std::vector<std::string> read;   // read from the file
};
Store& store() {
  static Store s;
  return s;
}

void* read_open(ImGuiContext*, ImGuiSettingsHandler*, const char* name) {
  return std::strcmp(name, "Settings") == 0 ? static_cast<void*>(&store()) : nullptr;
}
void read_line(ImGuiContext*, ImGuiSettingsHandler*, void*, const char* line) {
  if (line && *line) store().read.emplace_back(line);
}
void write_all(ImGuiContext*, ImGuiSettingsHandler* h, ImGuiTextBuffer* buf) {
  if (store().lines.empty()) return;
  buf->appendf("[%s][Settings]\n", h->TypeName);
  for (const std::string& l : store().lines) buf->appendf("%s\n", l.c_str());
  buf->append("\n");
}

std::vector<std::string> collect(const Shell& s) {
  std::vector<std::string> lines;
  if (s.panels.empty()) return lines;
  lines.push_back("panel=" + s.panels[s.current]->id());
  lines.push_back(std::string("show_source=") + (s.show_source ? "1" : "0"));
  char b[96];
  std::snprintf(b, sizeof b, "source_frac=%.3f", double(s.source_frac));
  lines.push_back(b);
  const float scale = s.ui_scale > 0 ? s.ui_scale : s.remembered_scale;  // --ui-scale is not remembered
  if (scale > 0) std::snprintf(b, sizeof b, "ui_scale=%.2f", double(scale)), lines.push_back(b);
  if (s.win_w > 0 && s.win_h > 0)
    std::snprintf(b, sizeof b, "window=%d,%d,%d,%d", s.win_x, s.win_y, s.win_w, s.win_h), lines.push_back(b);
  for (std::string& l : editor::settings_lines(s.editor)) lines.push_back(std::move(l));
  for (const auto& p : s.panels)
    for (const ParamSpec& sp : p->params().specs()) {
      if (p->id() == "measure" && sp.name == "run") continue;  // a one-shot request, not a setting
      lines.push_back("param." + p->id() + "." + sp.name + "=" + p->params().get_text(sp.name));
    }
  return lines;
}

}  // namespace

SettingsPersistence::SettingsPersistence(Shell& s, const std::string& ini_path) : shell_(&s) {
  if (ini_path.empty() || !ImGui::GetCurrentContext()) return;
  if (!ImGui::FindSettingsHandler(kType)) {
    ImGuiSettingsHandler h;
    h.TypeName = kType;
    h.TypeHash = ImHashStr(kType);
    h.ReadOpenFn = read_open;
    h.ReadLineFn = read_line;
    h.WriteAllFn = write_all;
    ImGui::GetCurrentContext()->SettingsHandlers.push_back(h);  // Dear ImGui 1.86 has no AddSettingsHandler
  }
  store().read.clear();
  ImGui::LoadIniSettingsFromDisk(ini_path.c_str());  // NewFrame would load it too, after the command line
  int restored = 0;
  std::string panel;
  for (const std::string& line : store().read) {
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = line.substr(0, eq), value = line.substr(eq + 1);
    if (key == "panel") {
      const int i = find_panel(s, value);
      if (i >= 0) s.current = size_t(i), panel = value;
    } else if (key == "show_source") {
      s.show_source = value == "1";
    } else if (key == "source_frac") {
      const double f = std::atof(value.c_str());
      if (f >= 0.1 && f <= 0.9) s.source_frac = float(f);
    } else if (key == "ui_scale") {
      const double f = std::atof(value.c_str());
      if (f >= 0.5 && f <= 4.0) s.ui_scale = float(f);
    } else if (key == "window") {
      int x = 0, y = 0, w = 0, h = 0;
      if (std::sscanf(value.c_str(), "%d,%d,%d,%d", &x, &y, &w, &h) == 4 && w >= 320 && h >= 240 && w <= 16384 &&
          h <= 16384)
        s.win_x = x, s.win_y = y, s.win_w = w, s.win_h = h;
    } else if (editor::apply_setting(s.editor, key, value)) {
      // the editor's mode and each rung's edited text (app/editor/persist.h)
    } else if (key.rfind("param.", 0) == 0) {
      const size_t dot = key.find('.', 6);
      if (dot == std::string::npos) continue;
      const int i = find_panel(s, key.substr(6, dot - 6));
      if (i < 0 || key == "param.measure.run") continue;
      try {
        s.panels[size_t(i)]->params().set(key.substr(dot + 1), value);
        ++restored;
      } catch (const InputError&) {
        // A value this build or backend refuses: the default stays.
      }
    }
  }
  if (!panel.empty() || restored)
    summary_ = "restored panel " + (panel.empty() ? std::string("(default)") : panel) + " and " +
               std::to_string(restored) + " values from " + ini_path;
  snapshot();
}

SettingsPersistence::~SettingsPersistence() {
  snapshot();
  shell_ = nullptr;
}

void SettingsPersistence::snapshot() {
  if (!shell_ || shell_->panels.empty()) return;
  std::vector<std::string> lines = collect(*shell_);
  if (lines != store().lines) {
    store().lines = std::move(lines);
    if (ImGui::GetCurrentContext()) ImGui::MarkIniSettingsDirty();
  }
}

}  // namespace kl::app
