// "Inside the fast kernel": see timeline_view.h. What it concludes is kernels/studies/timeline_study.*; the
// lanes are viz/lane_chart.*; this file picks, builds the rows and draws.
//   [SECTION] Phase colours
//   [SECTION] State: the recordings, the selection, the rows built for it
//   [SECTION] Parameters and the panel's section
//   [SECTION] Picker, provenance, "Record now"
//   [SECTION] The lanes, the key, the tooltip
//   [SECTION] The summary
#include "app/panels/timeline_view.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>
#include <sstream>

#include "app/notice.h"
#include "app/ui.h"
#include "kernels/runtime/errors.h"
#include "kernels/studies/timeline_study.h"
#include "viz/lane_chart.h"
#include "viz/layout_audit.h"
#include "viz/ui_log.h"

namespace kl::app {
namespace {

namespace ts = timeline_study;
using timeline::Phase;
using timeline::Recording;

// [SECTION] Phase colours ---------------------------------------------------------------------------------
// Waits for data in browns, the S products in blues, the PV (and dV, dK, dQ) products in greens (bright:
// issue; dark: wait), the CUDA-core work in warm colours, the producer's copies in cyans.
ImU32 phase_color(Phase p) {
  switch (p) {
    case Phase::Setup: return IM_COL32(105, 107, 118, 255);
    case Phase::Schedule: return IM_COL32(160, 162, 176, 255);
    case Phase::WaitQ: return IM_COL32(196, 128, 62, 255);
    case Phase::WaitK: return IM_COL32(160, 100, 48, 255);
    case Phase::WaitV: return IM_COL32(124, 82, 44, 255);
    case Phase::WaitTurn: return IM_COL32(128, 92, 176, 255);
    case Phase::IssueS: return IM_COL32(96, 170, 255, 255);
    case Phase::WaitS: return IM_COL32(46, 92, 168, 255);
    case Phase::Softmax: return IM_COL32(246, 204, 70, 255);
    case Phase::IssuePV: return IM_COL32(104, 218, 128, 255);
    case Phase::WaitPV: return IM_COL32(40, 124, 72, 255);
    case Phase::Rescale: return IM_COL32(242, 136, 176, 255);
    case Phase::Pack: return IM_COL32(198, 104, 206, 255);
    case Phase::Epilogue: return IM_COL32(232, 72, 72, 255);
    case Phase::WaitQFree: return IM_COL32(78, 84, 96, 255);
    case Phase::LoadQ: return IM_COL32(110, 226, 232, 255);
    case Phase::WaitKFree: return IM_COL32(66, 74, 84, 255);
    case Phase::LoadK: return IM_COL32(64, 184, 196, 255);
    case Phase::WaitVFree: return IM_COL32(56, 64, 74, 255);
    case Phase::LoadV: return IM_COL32(40, 142, 154, 255);
    case Phase::WaitTiles: return IM_COL32(196, 128, 62, 255);
    case Phase::LoadTiles: return IM_COL32(110, 226, 232, 255);
    case Phase::IssueDP: return IM_COL32(130, 150, 255, 255);
    case Phase::WaitDP: return IM_COL32(58, 70, 160, 255);
    case Phase::DS: return IM_COL32(252, 160, 64, 255);
    case Phase::IssueDVDK: return IM_COL32(104, 218, 128, 255);
    case Phase::StoreDS: return IM_COL32(242, 136, 176, 255);
    case Phase::WaitDS: return IM_COL32(128, 92, 176, 255);
    case Phase::IssueDQ: return IM_COL32(184, 236, 96, 255);
    case Phase::WaitDQ: return IM_COL32(40, 124, 72, 255);
    case Phase::AddDQ: return IM_COL32(214, 66, 150, 255);
    case Phase::WaitDVDK: return IM_COL32(36, 108, 92, 255);
    case Phase::WaitOFree: return IM_COL32(150, 56, 56, 255);
    case Phase::StoreO: return IM_COL32(255, 150, 120, 255);
    default: return IM_COL32(90, 90, 90, 255);
  }
}
const ImU32 kMark = IM_COL32(238, 238, 238, 255);
const ImU32 kTileA = IM_COL32(74, 78, 90, 255), kTileB = IM_COL32(52, 55, 64, 255);
const ImU32 kRecorded = IM_COL32(242, 204, 102, 255), kLive = IM_COL32(128, 230, 128, 255);

std::string fixed(double v, int digits) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}
std::string us(double ns) { return fixed(ns * 1e-3, ns < 10000 ? 2 : 1) + " µs"; }

std::vector<std::string> split_names(const std::string& list) {
  std::vector<std::string> out;
  std::istringstream in(list);
  std::string item;
  while (std::getline(in, item, ','))
    out.push_back(item.substr(item.find_first_not_of(' ')));
  return out;
}

// `text` in lines of at most `width` pixels, broken at spaces only (ImGui's wrapping also breaks after a full
// stop, splitting "34.5 µs" into "34." and "5 µs").
std::vector<std::string> wrap_words(const std::string& text, float width) {
  std::vector<std::string> lines;
  std::string line, word;
  std::istringstream in(text);
  while (in >> word) {
    const std::string longer = line.empty() ? word : line + " " + word;
    if (line.empty() || ImGui::CalcTextSize(longer.c_str()).x <= width) line = longer;
    else lines.push_back(line), line = word;
  }
  if (!line.empty()) lines.push_back(line);
  return lines;
}

// Text wrapped at `width` from the cursor (inside a column too), in `color` (0: the text colour).
void text_in(float width, const std::string& text, ImU32 color = 0) {
  if (color) ImGui::PushStyleColor(ImGuiCol_Text, color);
  std::string lines;
  for (const std::string& line : wrap_words(text, width)) lines += (lines.empty() ? "" : "\n") + line;
  ImGui::TextUnformatted(lines.c_str());
  if (color) ImGui::PopStyleColor();
}

// The next item on this line where `w` more pixels fit before the content region's right edge.
void same_line_if(float w) {
  const float right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
  const float x = ImGui::GetItemRectMax().x + ImGui::GetStyle().ItemSpacing.x;
  if (x + w <= right) ImGui::SameLine();
}

}  // namespace

// [SECTION] State -------------------------------------------------------------------------------------------
struct TimelineView::State {
  struct Entry {
    Recording rec;
    std::string origin, name;  // name: the embedded recording's `recording` value; empty otherwise
    bool live = false;
  };
  struct RowRef {
    int cta = -1, lane = -1;  // lane -1: the CTA's work-tile row
  };

  std::string kernel;
  std::vector<Entry> entries;
  std::vector<Recording> recs;  // the entries' recordings: the notice compares among them
  std::string load_error;
  int selected = -1;
  std::string param_seen;
  // The `phase` parameter as this frame began ("all" standalone), and what a click in the lanes or the key
  // set it to ("": no click).
  std::string phase = "all", clicked;
  bool in_panel = false;  // beside a source pane (a panel's tab), where a click on a phase shows its code
  std::vector<char> shown;  // per CTA of the selected recording
  bool aligned = true;
  viz::TimeWindow window;
  bool window_valid = false;
  float lane_height = 24;  // pixels at UI scale 1: up to twice that where the view has the room (fit_lanes)

  std::string built_key;
  std::vector<viz::LaneRow> rows;
  std::vector<RowRef> refs;
  std::vector<Phase> present;
  double lo = 0, hi = 1;
  int facts_for = -1;
  ts::Facts facts;
  std::string notice;
  std::vector<std::string> lines;

  ParamValues rec_params;
  std::string rec_error, rec_control_error;
  bool rec_params_set = false;

  // The recording the panel's `recording` parameter names (--set recording=NAME), once per change of it.
  void follow(const ParamValues& p) {
    if (p.get_text("recording") == param_seen) return;
    param_seen = p.get_text("recording");
    for (size_t i = 0; i < entries.size(); ++i)
      if (entries[i].name == param_seen) select(int(i));
  }

  void set_entries(std::vector<Entry> e) {
    entries = std::move(e);
    recs.clear();
    for (const Entry& x : entries) recs.push_back(x.rec);
    selected = -1;
    built_key.clear();
    facts_for = -1;
  }

  void select(int i) {
    if (i == selected) return;
    selected = i;
    const Recording& r = entries[size_t(i)].rec;
    shown.assign(r.ctas.size(), 0);
    if (!shown.empty()) shown[0] = 1;
    window_valid = false;
    built_key.clear();
  }

  const Recording& rec() const { return entries[size_t(selected)].rec; }

  std::string key() const {
    std::string k = std::to_string(selected) + (aligned ? "a" : "t");
    for (char c : shown) k += c ? '1' : '0';
    return k;
  }

  void build();
  viz::TimeWindow steady() const;
  void draw_picker();
  void draw_provenance(const AppContext& ctx);
  void draw_record(const AppContext& ctx);
  viz::LaneChartOptions lane_options() const;
  void fit_lanes(float room);
  void draw_lanes(float width);
  void draw_key(float width);
  void tooltip(const viz::LaneHover& h) const;
  void draw_summary(float width);
};

TimelineView::TimelineView(const std::string& kernel) : s_(std::make_unique<State>()) {
  s_->kernel = kernel;
  if (kernel.empty()) return;
  try {
    const timeline::File& f = ts::embedded();
    std::vector<State::Entry> e;
    for (const ts::Named& n : ts::named(f, kernel)) e.push_back({f.recordings[size_t(n.index)], ts::kSourcePath, n.name, false});
    s_->set_entries(std::move(e));
    if (s_->entries.empty()) s_->load_error = std::string(ts::kSourcePath) + " holds no recording of " + kernel;
  } catch (const std::exception& ex) {
    s_->load_error = ex.what();
  }
  std::vector<ParamSpec> specs = timeline::record_params();
  specs.insert(specs.begin(), choice_param("path", split_names(timeline::path_names(kernel)),
                                           kernel == timeline::kBackward ? "wgmma" : "auto",
                                           "the kernel recorded: KL_FLASH_FAST_PATH's values (auto: the by-shape default)"));
  s_->rec_params = ParamValues(specs);
}

TimelineView::~TimelineView() = default;

void TimelineView::State::build() {
  const Recording& r = rec();
  rows.clear(), refs.clear(), present.clear();
  std::set<Phase> seen;
  lo = std::numeric_limits<double>::max(), hi = std::numeric_limits<double>::lowest();
  bool first = true;
  for (size_t c = 0; c < r.ctas.size(); ++c) {
    if (!shown[c]) continue;
    const timeline::Cta& cta = r.ctas[c];
    const double off = aligned ? ts::cta_start(cta) : 0;
    const ts::Window all = ts::whole(cta, aligned);
    lo = std::min(lo, all.t0), hi = std::max(hi, all.t1);
    viz::LaneRow tiles;
    tiles.label = "CTA " + std::to_string(cta.index) + " · SM " + std::to_string(cta.sm);
    tiles.gap_before = !first;
    first = false;
    // The work tiles, from the first consumer lane: each run of one tile a segment.
    for (const timeline::Lane& lane : cta.lanes) {
      if (!timeline::consumer_role(lane.role)) continue;
      for (const timeline::Event& e : lane.events) {
        if (e.tile < 0) continue;
        if (!tiles.segments.empty() && tiles.segments.back().text == "work tile " + std::to_string(e.tile)) {
          tiles.segments.back().end = e.end_ns - off;
          continue;
        }
        tiles.segments.push_back({e.start_ns - off, e.end_ns - off, tiles.segments.size() % 2 ? kTileB : kTileA,
                                  "work tile " + std::to_string(e.tile), std::to_string(e.tile)});
      }
      break;
    }
    rows.push_back(std::move(tiles));
    refs.push_back({int(c), -1});
    // The producer first, then the warpgroups in order.
    std::vector<int> order;
    for (size_t l = 0; l < cta.lanes.size(); ++l)
      if (!timeline::consumer_role(cta.lanes[l].role)) order.push_back(int(l));
    for (size_t l = 0; l < cta.lanes.size(); ++l)
      if (timeline::consumer_role(cta.lanes[l].role)) order.push_back(int(l));
    for (int l : order) {
      const timeline::Lane& lane = cta.lanes[size_t(l)];
      viz::LaneRow row;
      row.label = lane.role;
      for (const timeline::Event& e : lane.events) {
        seen.insert(e.phase);
        const std::string step = e.step >= 0 ? std::to_string(e.step) : "";
        row.segments.push_back({e.start_ns - off, e.end_ns - off, phase_color(e.phase),
                                std::string(ts::short_label(e.phase)) + (step.empty() ? "" : " " + step), step});
      }
      for (const timeline::Interval& i : timeline::merged(timeline::in_flight(lane)))
        row.marks.push_back({i.start - off, i.end - off});
      row.mark_color = kMark;
      row.mark_band = row.marks.empty() ? 0.0f : 5.0f;
      rows.push_back(std::move(row));
      refs.push_back({int(c), l});
    }
  }
  if (!(hi > lo)) lo = 0, hi = 1;
  present.assign(seen.begin(), seen.end());
  if (facts_for != selected) {
    facts = ts::facts(r);
    notice = ts::notice(recs, selected);
    lines = ts::summary_lines(r, facts);
    facts_for = selected;
  }
  built_key = key();
}

viz::TimeWindow TimelineView::State::steady() const {
  const Recording& r = rec();
  for (size_t c = 0; c < r.ctas.size(); ++c)
    if (shown[c]) {
      const ts::Window w = ts::steady(r.ctas[c], aligned);
      return {w.t0, w.t1};
    }
  return {lo, hi};
}

// [SECTION] Parameters and the panel's section --------------------------------------------------------------
std::vector<ParamSpec> TimelineView::params(const std::string& kernel) {
  std::vector<std::string> names;
  try {
    for (const ts::Named& n : ts::named(ts::embedded(), kernel)) names.push_back(n.name);
  } catch (const std::exception&) {
    // The view shows the failure; the parameter still parses.
  }
  if (names.empty()) names.push_back("none");
  const std::string def = std::find(names.begin(), names.end(), "d128") != names.end() ? "d128" : names[0];
  std::vector<std::string> phases = {"all"};
  for (const std::string& n : split_names(timeline::phase_names())) phases.push_back(n);
  return {choice_param("recording", names, def,
                       "Inside the fast kernel: the recording drawn (docs/perf/timeline-h200.json, recorded on the GPU machine)"),
          choice_param("phase", phases, "all",
                       "Inside the fast kernel: the phase whose code the source pane highlights (all: every line that "
                       "stamps one)")};
}

std::vector<ParamSpec> TimelineView::with_params(std::vector<ParamSpec> panel, const std::string& kernel) {
  for (ParamSpec& s : params(kernel)) panel.push_back(std::move(s));
  return panel;
}

bool TimelineView::owns(const std::string& param) { return param == "recording" || param == "phase"; }

Panel::SourceFocus TimelineView::source_focus(const ParamValues& p) const {
  const State& s = *s_;
  if (!s.load_error.empty() || s.entries.empty()) return {};
  const Recording& r = s.entries[size_t(std::max(s.selected, 0))].rec;
  Panel::SourceFocus f;
  f.file = r.kernel == timeline::kBackward ? "flash_attention_backward_fast_sm90.cuh" : "flash_attention_fast_sm90.cuh";
  f.read_only = true;
  const std::string picked = p.get_text("phase");
  Phase ph;
  if (!timeline::phase_from_name(picked, &ph)) {  // "all"
    f.highlighted = "every line where it stamps a phase for the timeline (click a phase in the lanes or the key: "
                    "its code)";
    return f;
  }
  f.stamps = {picked};
  f.highlighted = "where it stamps \"" + std::string(timeline::phase_info(ph).label) +
                  "\", and that phase's code (click the phase in the key again: every stamp)";
  return f;
}

void TimelineView::use_file(const timeline::File& f, const std::string& origin, int live_from) {
  if (f.recordings.empty()) throw InputError(origin + ": no recordings");
  std::vector<State::Entry> e;
  for (const Recording& r : f.recordings) e.push_back({r, origin, "", live_from >= 0 && int(e.size()) >= live_from});
  s_->set_entries(std::move(e));
  s_->load_error.clear();
  s_->select(0);
}

void TimelineView::select(int index, const std::string& what) {
  const int n = int(s_->entries.size());
  if (index < 0 || index >= n)
    throw InputError(out_of_range_message(what, std::to_string(index), "[0, " + std::to_string(n - 1) + "]"));
  s_->select(index);
}

void TimelineView::show_ctas(const std::vector<int>& ctas, const std::string& what) {
  if (s_->selected < 0) throw InputError(what + ": no recording selected");
  const Recording& r = s_->rec();
  std::string recorded;
  for (const timeline::Cta& c : r.ctas) recorded += (recorded.empty() ? "" : ", ") + std::to_string(c.index);
  std::vector<char> shown(r.ctas.size(), 0);
  for (int c : ctas) {
    size_t i = 0;
    while (i < r.ctas.size() && r.ctas[i].index != c) ++i;
    if (i == r.ctas.size()) throw InputError(out_of_range_message(what, std::to_string(c), "the recorded CTAs: " + recorded));
    shown[i] = 1;
  }
  if (ctas.empty() && !shown.empty()) shown[0] = 1;
  s_->shown = shown;
  s_->window_valid = false;
  s_->built_key.clear();
}

void TimelineView::set_window(double t0, double t1, const std::string& what) {
  if (s_->selected < 0) throw InputError(what + ": no recording selected");
  if (s_->built_key != s_->key()) s_->build();
  auto text = [](double ns) { return fixed(ns * 1e-3, 3); };
  if (!(t1 > t0) || t0 < s_->lo - 1e-6 || t1 > s_->hi + 1e-6)
    throw InputError(out_of_range_message(what, text(t0) + ".." + text(t1),
                                          "a window inside " + text(s_->lo) + ".." + text(s_->hi) + " (µs)"));
  s_->window = {t0, t1};
  s_->window_valid = true;
}

const timeline::Recording* TimelineView::selected() const {
  return s_->selected >= 0 ? &s_->rec() : nullptr;
}

std::string TimelineView::notice() const {
  if (s_->selected < 0) return "";
  if (s_->built_key != s_->key()) s_->build();
  return s_->notice;
}

std::string TimelineView::notice(const ParamValues& p) const {
  if (s_->entries.empty()) return "";
  s_->follow(p);
  if (s_->selected < 0) s_->select(0);
  return notice();
}

void TimelineView::draw(AppContext& ctx, ParamValues* p) {
  State& s = *s_;
  if (!s.load_error.empty()) {
    ui::error_box(s.load_error);
    return;
  }
  if (s.entries.empty()) return;
  if (p) s.follow(*p);
  s.in_panel = p != nullptr;
  s.phase = p ? p->get_text("phase") : "all";
  s.clicked.clear();
  if (s.selected < 0) s.select(0);
  ImGui::PushID("timeline-view");
  // The picker, then the lanes (on a 1280x720 projector with the source pane open, the tab has about 200 px:
  // the chart comes first), then what to notice, where the recording comes from and "Record now".
  s.draw_picker();
  if (s.built_key != s.key()) s.build();
  if (!s.window_valid) s.window = s.steady(), s.window_valid = true;
  const float avail = ImGui::GetContentRegionAvail().x, gap = ui::px(18), side = ui::px(320);
  const bool beside = avail >= ui::px(620) + side + gap;
  const float left = beside ? avail - side - gap : avail;
  s.fit_lanes(ImGui::GetWindowHeight() - ImGui::GetCursorPosY());
  ImGui::BeginGroup();
  s.draw_lanes(left);
  s.draw_key(left);
  ImGui::EndGroup();
  if (p && !s.clicked.empty()) {  // the source pane shows its code from the next frame
    p->set("phase", s.clicked);
    viz::ui_log::event("timeline phase " + s.clicked);
  }
  if (beside) ImGui::SameLine(0, gap);
  ImGui::BeginGroup();
  s.draw_summary(beside ? side : avail);
  ImGui::EndGroup();
  if (!s.in_panel) app::notice(s.notice);  // in a panel, its notice line at the top says it (notice(p))
  s.draw_provenance(ctx);
  s.draw_record(ctx);
  ImGui::PopID();
}

// [SECTION] Picker, provenance, "Record now" ---------------------------------------------------------------
void TimelineView::State::draw_picker() {
  auto label = [&](size_t i) {
    const Entry& e = entries[i];
    return (e.live ? "recorded now " + std::to_string(i) : e.name.empty() ? std::to_string(i) : e.name) + ": " +
           ts::label(e.rec);
  };
  const std::string cur = label(size_t(selected));
  ImGui::AlignTextToFramePadding();
  ImGui::TextUnformatted("Recording");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(std::min(ImGui::GetContentRegionAvail().x, ui::px(560)));
  if (ImGui::BeginCombo("##recording", cur.c_str())) {
    for (size_t i = 0; i < entries.size(); ++i)
      if (ImGui::Selectable(label(i).c_str(), int(i) == selected)) select(int(i));
    ImGui::EndCombo();
  }
  viz::audit::last_item("timeline recording picker");
  const Recording& r = rec();
  same_line_if(ImGui::CalcTextSize("CTAs:").x);
  ImGui::AlignTextToFramePadding();
  ImGui::TextUnformatted("CTAs:");
  for (size_t c = 0; c < r.ctas.size(); ++c) {
    const std::string l = std::to_string(r.ctas[c].index);
    same_line_if(ImGui::GetFrameHeight() + ImGui::GetStyle().ItemInnerSpacing.x + ImGui::CalcTextSize(l.c_str()).x);
    bool on = shown[c] != 0;
    if (ImGui::Checkbox((l + "##cta").c_str(), &on)) {
      int n = 0;
      for (char x : shown) n += x ? 1 : 0;
      if (on || n > 1) shown[c] = on ? 1 : 0;  // at least one CTA stays shown
      window_valid = false;
    }
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("CTA %d of %d (SM %d): its lanes shown", r.ctas[c].index, r.grid_ctas, r.ctas[c].sm);
  }
  const char* align = "align CTAs at their start";
  same_line_if(ImGui::GetFrameHeight() + ImGui::GetStyle().ItemInnerSpacing.x + ImGui::CalcTextSize(align).x);
  if (ImGui::Checkbox(align, &aligned)) window_valid = false;
  const char* b1 = "Steady state";
  const char* b2 = "Whole span";
  same_line_if(ImGui::CalcTextSize(b1).x + ImGui::GetStyle().FramePadding.x * 2);
  if (ImGui::Button(b1)) window_valid = false;
  same_line_if(ImGui::CalcTextSize(b2).x + ImGui::GetStyle().FramePadding.x * 2);
  if (ImGui::Button(b2)) {
    if (built_key != key()) build();
    window = {lo, hi};
    window_valid = true;
  }
}

void TimelineView::State::draw_provenance(const AppContext& ctx) {
  const Entry& e = entries[size_t(selected)];
  if (e.live) {
    text_in(ImGui::GetContentRegionAvail().x, "Recorded now, in this session, on " + e.rec.device + " (CUDA " + e.rec.cuda + ").",
            kLive);
    return;
  }
  std::string text = "A recording, not a live run: " + ts::provenance(e.rec) + ", read from " + e.origin +
                     (e.origin == ts::kSourcePath ? " (embedded at build time)." : ".");
  if (ctx.backend.backend != Backend::Cuda)
    text = "The CPU backend cannot run the Hopper kernels this view records, so it draws the file. " + text;
  text_in(ImGui::GetContentRegionAvail().x, text, kRecorded);
}

void TimelineView::State::draw_record(const AppContext& ctx) {
  if (kernel.empty() || ctx.backend.backend != Backend::Cuda) return;
  std::string why;
  if (!timeline::can_record(&why)) {
    ui::wrapped_dim("Record now: " + why + ".");
    return;
  }
  if (!rec_params_set) {  // the controls start at the first recording's shape
    const Recording& r = rec();
    for (const std::string& kv : {"L=" + std::to_string(r.Lq), "d=" + std::to_string(r.d),
                                  std::string("causal=") + (r.causal ? "1" : "0"), "B=" + std::to_string(r.B),
                                  "H=" + std::to_string(r.H), "Hkv=" + std::to_string(r.Hkv == r.H ? 0 : r.Hkv)})
      rec_params.set(kv);
    rec_params_set = true;
  }
  ImGui::AlignTextToFramePadding();
  ImGui::TextUnformatted("Record now:");
  ImGui::SameLine();
  ImGui::PushItemWidth(110);
  if (kernel == timeline::kBackward)
    ui::param_row(rec_params, {"L", "d", "causal", "B", "H", "deterministic"}, &rec_control_error, 12);
  else
    ui::param_row(rec_params, {"L", "d", "causal", "B", "H", "Hkv"}, &rec_control_error, 12);
  ImGui::PopItemWidth();
  // The path's combo as wide as its longest name (at UI scale 1, as item widths are given).
  float names = 0;
  for (const std::string& c : rec_params.spec("path")->choices) names = std::max(names, ImGui::CalcTextSize(c.c_str()).x);
  ImGui::PushItemWidth(names / ui::px(1) + 48);
  ui::param_row(rec_params, {"path"}, &rec_control_error, 12);
  ImGui::PopItemWidth();
  ui::error_box(rec_control_error);
  same_line_if(ImGui::CalcTextSize("Record now").x + ImGui::GetStyle().FramePadding.x * 2);
  if (ImGui::Button("Record now")) {
    rec_error.clear();
    try {
      const timeline::RecordRequest q = timeline::request_of(kernel, rec_params, rec_params.get_text("path"), 20);
      entries.push_back({timeline::record(q), "this session", "", true});
      recs.push_back(entries.back().rec);
      facts_for = -1;
      select(int(entries.size()) - 1);
    } catch (const std::exception& e) {
      rec_error = ui::error_text(e);
    }
  }
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("One launch of the instrumented kernel at these settings (the first, middle and last CTAs),\n"
                      "timed against the plain kernel: what `kernel-ladder timeline` records");
  ui::error_box(rec_error);
}

// [SECTION] The lanes, the key, the tooltip ------------------------------------------------------------------
viz::LaneChartOptions TimelineView::State::lane_options() const {
  viz::LaneChartOptions o;
  o.lo = lo, o.hi = hi;
  o.min_span = 100;  // ns
  o.axis_unit = 1000;
  o.axis_label = "µs";
  o.lane_height = lane_height;
  o.audit_name = "timeline lanes";
  return o;
}

// Lanes taller, up to twice, where the view has the room below the picker (measured at scroll 0, so scrolling
// does not resize them): at 4K with UI scale 2 the chart at its usual height took a fifth of the panel's height
// and left the rest under the key empty. Room is kept for the overview, the key and the lines under it.
void TimelineView::State::fit_lanes(float room) {
  viz::LaneChartOptions o = lane_options();
  o.lane_height = 24;
  const float base = viz::lane_chart_height(rows, o);
  if (!(base > 0)) return;
  const float spare = room - ui::px(190) - base;
  lane_height = std::floor(24 * std::clamp(1 + spare / base, 1.0f, 2.0f));
}

void TimelineView::State::draw_lanes(float width) {
  const viz::LaneChartOptions o = lane_options();
  // The whole span, the window on it; a click there moves the window.
  viz::LaneChartOptions ov = o;
  ov.overview = true;
  ov.lane_height = 4;
  ov.highlight = &window;
  ov.audit_name = "timeline overview";
  viz::TimeWindow whole{lo, hi};
  const viz::LaneChartResult r0 = viz::lane_chart("overview", rows, ov, &whole, width);
  if (r0.moved) window = whole;
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("the whole span; the window shown below in white: click to move it");
  ImGui::Dummy(ImVec2(width, ui::px(2)));
  const viz::LaneChartResult r = viz::lane_chart("lanes", rows, o, &window, width);
  if (r.reset) window = steady();
  if (r.hover.active) tooltip(r.hover);
  if (r.clicked && in_panel && refs[size_t(r.hover.row)].lane >= 0) {  // a phase: its code in the source pane
    const RowRef ref = refs[size_t(r.hover.row)];
    const timeline::Lane& lane = rec().ctas[size_t(ref.cta)].lanes[size_t(ref.lane)];
    clicked = timeline::phase_info(lane.events[size_t(r.hover.segment)].phase).name;
  }
  text_in(width,
          (aligned ? "time from each CTA's start (µs)" : "time from the recording's first stamp (µs)") +
              std::string("; window ") + us(window.t1 - window.t0) +
              ". Ctrl + wheel: zoom; drag: pan; double click: the steady-state window. White bar under a lane: "
              "that warpgroup's product in flight (issue to its wait's end)." +
              std::string(in_panel ? " Click a phase (here or in the key): its code in the source pane." : ""),
          ImGui::GetColorU32(ImGuiCol_TextDisabled));
}

void TimelineView::State::draw_key(float width) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float font = ImGui::GetFontSize(), right = ImGui::GetCursorScreenPos().x + width;
  bool first = true;
  // A phase's swatch is a button: clicked, the source pane highlights its code (clicked again: every stamp).
  // The picked one is underlined.
  auto swatch = [&](ImU32 c, const char* text, bool thin, const char* name) {
    const float w = font + ui::px(4) + ImGui::GetStyle().ItemSpacing.x + ImGui::CalcTextSize(text).x;
    // Beside the last where it fits (NewLine after SameLine would widen the group to the abandoned position).
    if (!first && ImGui::GetItemRectMax().x + ui::px(12) + w <= right) ImGui::SameLine(0, ui::px(12));
    first = false;
    const ImVec2 p = ImGui::GetCursorScreenPos();
    ImGui::BeginGroup();
    ImGui::Dummy(ImVec2(font + ui::px(4), font));
    const float y0 = thin ? p.y + font - ui::px(4) : p.y + ui::px(3);
    dl->AddRectFilled(ImVec2(p.x, y0), ImVec2(p.x + font, p.y + font + ui::px(1)), c);
    ImGui::SameLine();
    ImGui::TextUnformatted(text);
    ImGui::EndGroup();
    if (!name || !in_panel) return;
    // "place phase NAME x0 y0 x1 y1": where a driven test clicks it.
    viz::ui_log::place("phase", name, ImGui::GetItemRectMin().x, ImGui::GetItemRectMin().y, ImGui::GetItemRectMax().x,
                       ImGui::GetItemRectMax().y);
    if (phase == name)
      dl->AddLine(ImVec2(ImGui::GetItemRectMin().x, ImGui::GetItemRectMax().y + ui::px(1)),
                  ImVec2(ImGui::GetItemRectMax().x, ImGui::GetItemRectMax().y + ui::px(1)), ImGui::GetColorU32(ImGuiCol_Text),
                  ui::px(2));
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("click: the code of \"%s\" in the source pane", text);
    if (ImGui::IsItemClicked()) clicked = phase == name ? "all" : name;
  };
  for (Phase p : present) swatch(phase_color(p), ts::short_label(p), false, timeline::phase_info(p).name);
  swatch(kMark, "product in flight", true, nullptr);
}

void TimelineView::State::tooltip(const viz::LaneHover& h) const {
  const RowRef ref = refs[size_t(h.row)];
  const timeline::Cta& cta = rec().ctas[size_t(ref.cta)];
  const double off = aligned ? ts::cta_start(cta) : 0;
  const std::string where = "CTA " + std::to_string(cta.index) + " (SM " + std::to_string(cta.sm) + ")";
  if (h.segment < 0) return;
  const viz::LaneSegment& seg = rows[size_t(h.row)].segments[size_t(h.segment)];
  if (ref.lane < 0) {
    ImGui::SetTooltip("%s: %s, %s (%s to %s)", where.c_str(), seg.text.c_str(), us(seg.end - seg.start).c_str(),
                      us(seg.start).c_str(), us(seg.end).c_str());
    return;
  }
  const timeline::Lane& lane = cta.lanes[size_t(ref.lane)];
  const timeline::Event& e = lane.events[size_t(h.segment)];
  const bool fwd = rec().kernel == timeline::kForward;
  std::string step = e.step >= 0 ? std::string(fwd ? ", K/V step " : ", query step ") + std::to_string(e.step) : "";
  std::string tile = e.tile >= 0 ? "work tile " + std::to_string(e.tile) : "no work tile yet";
  ImGui::SetTooltip("%s, %s\n%s\n%s%s\n%s: %s to %s%s", lane.role.c_str(), where.c_str(), timeline::phase_info(e.phase).label,
                    tile.c_str(), step.c_str(), us(e.end_ns - e.start_ns).c_str(), us(e.start_ns - off).c_str(),
                    us(e.end_ns - off).c_str(), in_panel ? "\nclick: its code in the source pane" : "");
}

// [SECTION] The summary ------------------------------------------------------------------------------------
void TimelineView::State::draw_summary(float width) {
  ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(0.95f, 0.8f, 0.4f, 1.0f));
  text_in(width, "What the recording adds up to");
  ImGui::PopStyleColor();
  for (const std::string& l : lines) text_in(width, l);
  text_in(width, "the tensor cores busy, per warpgroup (its products in flight, of its span):",
          ImGui::GetColorU32(ImGuiCol_TextDisabled));
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float font = ImGui::GetFontSize();
  float label_w = ImGui::CalcTextSize("any warpgroup").x;
  for (const ts::CtaFacts& c : facts.ctas)
    for (const ts::LaneFacts& l : c.lanes) label_w = std::max(label_w, ImGui::CalcTextSize(l.role.c_str()).x);
  const float pct_w = ImGui::CalcTextSize("100%").x, pad = ui::px(6);
  const float bar_w = std::max(ui::px(20), width - label_w - pct_w - 2 * pad);
  auto bar = [&](const std::string& label, double share, ImU32 color) {
    const ImVec2 p = ImGui::GetCursorScreenPos();
    ImGui::Dummy(ImVec2(width, font + ui::px(2)));
    dl->AddText(p, ImGui::GetColorU32(ImGuiCol_Text), label.c_str());
    const float x0 = p.x + label_w + pad, y0 = p.y + ui::px(3), y1 = p.y + font - ui::px(1);
    dl->AddRectFilled(ImVec2(x0, y0), ImVec2(x0 + bar_w, y1), IM_COL32(40, 42, 48, 255));
    dl->AddRectFilled(ImVec2(x0, y0), ImVec2(x0 + bar_w * float(std::clamp(share, 0.0, 1.0)), y1), color);
    const std::string pct = fixed(100.0 * share, 0) + "%";
    dl->AddText(ImVec2(x0 + bar_w + pad, p.y), ImGui::GetColorU32(ImGuiCol_Text), pct.c_str());
  };
  for (const ts::CtaFacts& c : facts.ctas) {
    text_in(width, "CTA " + std::to_string(c.index) + " (SM " + std::to_string(c.sm) + "), " + us(c.span_ns) + ", " +
                       std::to_string(c.tiles) + (c.tiles == 1 ? " work tile" : " work tiles"));
    for (const ts::LaneFacts& l : c.lanes) bar(l.role, l.in_flight, IM_COL32(96, 170, 255, 255));
    bar("any warpgroup", c.tensor_share, IM_COL32(104, 218, 128, 255));
  }
}

}  // namespace kl::app
