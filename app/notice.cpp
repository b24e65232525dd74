#include "app/notice.h"

#include <imgui.h>
#include <imgui_internal.h>

#include "app/ui.h"
#include "viz/ui_log.h"

namespace kl::app {

void notice(const std::string& text) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float pad = ui::px(4);
  const float right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
  ImGui::Dummy(ImVec2(0, pad));
  dl->ChannelsSplit(2);
  dl->ChannelsSetCurrent(1);
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  ImGui::SetCursorScreenPos(ImVec2(p0.x + pad, p0.y));
  ImGui::BeginGroup();
  ImGui::PushStyleColor(ImGuiCol_Text, IM_COL32(255, 196, 80, 255));
  ImGui::TextUnformatted("Notice:");
  ImGui::PopStyleColor();
  ImGui::SameLine();
  // Broken between words only (ui::wrapped_at): Dear ImGui's own wrap breaks after a '.', which split
  // "0.981x" as "0." / "981x" across the band's lines.
  ImGui::PushStyleColor(ImGuiCol_Text, IM_COL32(245, 245, 245, 255));
  ui::wrapped_at(text, right - ImGui::GetCursorScreenPos().x - pad);
  ImGui::PopStyleColor();
  ImGui::EndGroup();
  const float bottom = ImGui::GetItemRectMax().y;
  dl->ChannelsSetCurrent(0);
  dl->AddRectFilled(ImVec2(p0.x, p0.y - pad), ImVec2(right, bottom + pad), IM_COL32(74, 58, 24, 255), ui::px(3));
  dl->AddRectFilled(ImVec2(p0.x, p0.y - pad), ImVec2(p0.x + ui::px(3), bottom + pad), IM_COL32(255, 196, 80, 255));
  dl->ChannelsMerge();
  ImGui::Dummy(ImVec2(0, pad));
}

void checks_summary(const std::vector<study::Check>& checks) {
  bool all = !checks.empty();
  for (const study::Check& c : checks) all = all && c.pass;
  if (!all) {
    for (const study::Check& c : checks)
      if (!c.pass) ui::wrapped_colored(IM_COL32(255, 110, 100, 255), c.sentence);
    return;
  }
  std::string line = "all " + std::to_string(checks.size()) + " checks pass: ";
  std::string list;
  for (size_t i = 0; i < checks.size(); ++i) list += (i ? "\n" : "") + checks[i].sentence;
  // One line: as many whole check sentences as fit, then "...".
  const float room = ImGui::GetContentRegionAvail().x;
  std::string shown = line;
  for (size_t i = 0; i < checks.size(); ++i) {
    const std::string next = shown + (i ? "; " : "") + checks[i].sentence;
    if (ImGui::CalcTextSize((next + " ...").c_str()).x > room) {
      shown += i ? " ..." : "hover for the list";
      break;
    }
    shown = next;
  }
  ImGui::PushStyleColor(ImGuiCol_Text, IM_COL32(120, 220, 120, 255));
  ImGui::TextUnformatted(shown.c_str());
  ImGui::PopStyleColor();
  if (ImGui::IsItemHovered()) {
    ImGui::BeginTooltip();
    ui::wrapped_at(list, ImGui::GetFontSize() * 40.0f);
    ImGui::EndTooltip();
  }
}

ViewTabs::ViewTabs(const char* id, ParamValues& p, const char* param, std::string& forced)
    : p_(p), param_(param), id_(id), forced_(forced) {
  want_ = p_.get_text(param_);
  force_ = forced_ != want_;  // set from outside (a tour stop, --set): select its tab this frame
  forced_ = want_;
  open_ = ImGui::BeginTabBar(id, ImGuiTabBarFlags_FittingPolicyScroll);
}

bool ViewTabs::item(const char* label, const char* value) {
  if (!open_) return false;
  const bool mine = value && want_ == value;
  if (force_ && mine) {
    // Selected and shown in this very frame: ImGui applies SetSelected a frame late, and a frame of another
    // tab's content first would leave the window's scroll extent a frame behind (the layout audit sees it).
    ImGuiTabBar* bar = GImGui->CurrentTabBar;
    bar->SelectedTabId = bar->VisibleTabId = bar->NextSelectedTabId = ImGui::GetID(label);
  }
  const bool shown = ImGui::BeginTabItem(label, nullptr, force_ && mine ? ImGuiTabItemFlags_SetSelected : 0);
  if (viz::ui_log::is_open()) {  // "place tab BAR VALUE x0 y0 x1 y1": where a driven test clicks it
    const ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
    viz::ui_log::place("tab", std::string(id_) + " " + (value ? value : label), a.x, a.y, b.x, b.y);
  }
  if (!shown) return false;
  if (force_ && !mine) {  // an earlier tab ImGui would show for this one frame: register it, draw nothing
    ImGui::EndTabItem();
    return false;
  }
  if (!force_ && value && !mine) p_.set(param_, value), forced_ = value;  // clicked: the parameter follows
  return true;
}

void ViewTabs::end_item() { ImGui::EndTabItem(); }

void ViewTabs::end() {
  if (open_) ImGui::EndTabBar();
  open_ = false;
}

}  // namespace kl::app
