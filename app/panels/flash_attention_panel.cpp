// Rung 5 panel: FlashAttention's tiled online softmax, step by step, drawn from the kernel's own trace.
// What it concludes (the per-step state, checks, memory and traffic) is kernels/studies/
// flash_attention_study; this file fills textures and draws, showing the study's sentences as they are.
// The notice line, the controls, the checks in one line and the traffic strip, then tabs (`view`).
//   [SECTION] Panel state and controls
//   [SECTION] Compute: one traced run per shape; the step only recomposes the weights from the trace
//   [SECTION] Stepper
//   [SECTION] Tile grid: the chosen block done / current / pending; other programs; skipped
//   [SECTION] The chosen query block: m, l, alpha, partial against final weights; the partial output
//   [SECTION] The IO argument: traffic against BLOCK_M, against M and against Lk
//   [SECTION] Shared memory: rung 4 against rung 5, the budget bars, the fast kernel's tiles
#include <imgui.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

#include "app/panels/panels.h"
#include "app/panels/memory_access_view.h"
#include "app/panels/timeline_view.h"  // issue 30: "Inside the fast kernel"
#include "app/notice.h"
#include "app/ui.h"
#include "kernels/rungs/attention.h"
#include "kernels/rungs/flash_attention.h"
#include "kernels/rungs/flash_attention_fast.h"
#include "kernels/runtime/buffer.h"
#include "kernels/runtime/errors.h"
#include "kernels/studies/flash_attention_study.h"
#include "viz/data_texture.h"
#include "viz/heatmap.h"
#include "viz/layout_audit.h"
#include "viz/plot.h"

namespace kl::app {
namespace {

namespace fa = flash_attention;
namespace fs = flash_attention_study;

const ImU32 kDone = IM_COL32(74, 130, 199, 255);
const ImU32 kCurrent = IM_COL32(236, 172, 62, 255);
const ImU32 kPending = IM_COL32(58, 61, 70, 255);
const ImU32 kSkipped = IM_COL32(32, 33, 37, 255);
const ImU32 kMoved = IM_COL32(236, 172, 62, 255);   // rows whose max moved at this step
const ImU32 kSteady = IM_COL32(74, 130, 199, 255);
const ImU32 kOther = IM_COL32(64, 112, 108, 255);   // query blocks of the other programs
const ImU32 kStd = IM_COL32(200, 120, 220, 255), kRung4 = IM_COL32(235, 110, 90, 255), kRung5 = IM_COL32(90, 200, 140, 255);

// Text wrapped at `width` from the cursor (inside a column, where the window's edge is not the column's).
void wrapped_in(float width, const char* text, bool disabled = false) {
  if (disabled) ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetColorU32(ImGuiCol_TextDisabled));
  ui::wrapped_at(text, width);  // between words: a number never breaks across lines
  if (disabled) ImGui::PopStyleColor();
}

// ui::section inside a column: the heading wraps at the column's width, the rule spans it.
void column_section(float width, const char* title) {
  ImGui::Spacing();
  ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(0.95f, 0.8f, 0.4f, 1.0f));
  wrapped_in(width, title);
  ImGui::PopStyleColor();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  ImGui::GetWindowDrawList()->AddLine(p, ImVec2(p.x + width, p.y), ImGui::GetColorU32(ImGuiCol_Separator));
  ImGui::Dummy(ImVec2(width, 1));
}

// How many views of at least `min_w` pixels (at UI scale 1) fit side by side in `width`, `gap` apart.
int fit(float width, float min_w, float gap, int n) {
  return std::clamp(int((width + gap) / (ui::px(min_w) + gap)), 1, n);
}

// [SECTION] Panel state and controls ------------------------------------------------------------------

class FlashAttentionPanel : public Panel {
 public:
  FlashAttentionPanel()
      // The study's list (`study flash-attention` and the panel agree), and the timeline view's two (issue 30).
      : params_(TimelineView::with_params(fs::params(), timeline::kForward)) {}

  std::string id() const override { return "flash-attention"; }
  std::string title() const override { return "5 · FlashAttention"; }
  ParamValues& params() override { return params_; }
  SourceFocus source_focus() const override {
    if (params_.get_text("view") == "inside") return inside_.source_focus(params_);  // the recorded fast kernel's
    return {"flash_attention.cu", {"visible_keys", "tiles_to_run", "flash_teaching"}};
  }
  std::vector<TourStop> tour_stops() const override {
    // The stops keep their names (the tour's file names); past the wall opens on the IO view, where rung 4
    // is absent and rung 5 is not.
    return {{"step1", {"step=1"}}, {"step3", {"step=3"}}, {"last-step", {"step=6"}},
            {"causal-step4", {"causal=1", "step=4"}},
            {"past-the-wall", {"view=io", "lk=4096", "lq=32", "block_n=64", "step=40"}}};
  }
  std::vector<Animation> animations() const override {
    return {{"stepper", "step=1..6", {}, 2}, {"stepper-causal", "step=1..6", {"causal=1"}, 2}};
  }

  // Laid out for a 1280x720 projector: the notice line, the controls, the checks in one line and the
  // device-memory traffic the notice talks about, then tabs (the `view` parameter): the steps, the IO
  // argument, shared memory, the checks. Another view is one more tabs.item() block in draw_tabs().
  void draw(AppContext& ctx) override {
    const Backend b = ctx.backend.backend;
    std::string key = backend_name(b);
    for (const ParamSpec& s : params_.specs())
      if (s.name != "step" && s.name != "qblock" && s.name != "view" && !TimelineView::owns(s.name))
        key += "/" + params_.get_text(s.name);
    key += "/" + params_.get_text("qblock");
    if (key != computed_key_) {
      computed_key_ = key;
      compute(b);
    }
    // On the Timeline tab (a recording of the fast kernel) the notice line says what the recording shows, not
    // what this rung's study found, and the controls, which set nothing it draws, are greyed out.
    const bool recorded = params_.get_text("view") == "inside";
    if (valid_) notice(recorded ? inside_.notice(params_) : res_.notice);
    ui::begin_not_here(recorded);
    ImGui::PushItemWidth(90);
    ui::param_row(params_, {"lq", "lk", "d", "causal", "block_m", "block_n", "qblock", "magnitude", "seed"},
                  &control_error_, 12);
    ImGui::PopItemWidth();
    ui::end_not_here(recorded, TimelineView::kPanelControlsNote);
    ui::error_box(control_error_);
    if (!run_error_.empty()) {
      ui::error_box(run_error_);
      return;
    }
    if (!valid_) return;
    checks_summary({{"reference", res_.check.ok, res_.check.sentence()}, {"rung4", res_.rung4.ok, res_.rung4.sentence()}});
    if (!adjust_note_.empty()) wrapped_in(ImGui::GetContentRegionAvail().x, adjust_note_.c_str(), true);
    draw_traffic_strip();
    draw_tabs(ctx, b);
    if (ImGui::CollapsingHeader("What you are looking at")) ui::explain("flash_attention.md");
    fresh_ = false;
  }

  void draw_tabs(AppContext& ctx, Backend b) {
    ViewTabs tabs("flash-views", params_, "view", view_forced_);
    if (tabs.item("Steps", "steps")) {
      draw_steps(b);
      tabs.end_item();
    }
    if (tabs.item("IO: traffic", "io")) {
      // The plots first (at 1280x720 under the source pane they fit only there), then issue 31's sectors per
      // request of this rung's main loads and stores (app/panels/memory_access_view.h).
      draw_io(ImGui::GetContentRegionAvail().x);
      draw_memory_access(b, "flash-attention", params_);
      tabs.end_item();
    }
    if (tabs.item("Shared memory", "memory")) {
      draw_smem(ImGui::GetContentRegionAvail().x, b);
      tabs.end_item();
    }
    if (tabs.item("Checks", "checks")) {
      for (const attention_study::Line* l : {&res_.check, &res_.rung4}) ui::status_line(l->label.c_str(), l->text, l->ok);
      tabs.end_item();
    }
    if (tabs.item("Timeline", "inside")) {  // issue 30: the fast Hopper kernel's recorded timeline
      inside_.draw(ctx, &params_);
      tabs.end_item();
    }
    tabs.end();
  }

  // The step view: the stepper, then the tiles beside the chosen block where both have room (the block's
  // bar charts and heatmaps need about 640 px at scale 1); stacked, the block comes under the tiles.
  void draw_steps(Backend b) {
    draw_stepper();
    const int64_t step = params_.get_int("step");
    if (step != composed_step_) compose(b, step);
    const float avail = ImGui::GetContentRegionAvail().x, gap = ui::px(18);
    const float left_w = std::floor(avail * 0.40f), right_w = avail - left_w - gap;
    if (right_w >= ui::px(640)) {
      ImGui::BeginGroup();
      draw_tile_grid(left_w, "white: the one shown on the right");
      ImGui::EndGroup();
      ImGui::SameLine(0, gap);
      ImGui::BeginGroup();
      draw_block(right_w, step);
      ImGui::EndGroup();
    } else {
      draw_tile_grid(avail, "white: the one shown below");
      draw_block(avail, step);
    }
    draw_partial(ImGui::GetContentRegionAvail().x, step);
  }

  // The device-memory traffic the notice talks about, in one row where it fits (else one line each):
  // standard attention, rung 4 (or why it is absent: no bar where it is refused) and rung 5, bars on one
  // scale with their KiB.
  void draw_traffic_strip() {
    const fs::Traffic& t = res_.mem;
    const float avail = ImGui::GetContentRegionAvail().x, font = ImGui::GetFontSize();
    const float line = ImGui::GetTextLineHeightWithSpacing();
    const char* head = "device-memory traffic here:";
    const double bytes[3] = {t.unfused, t.smem_refused ? -1.0 : t.smem, t.flash};
    const ImU32 colours[3] = {kStd, kRung4, kRung5};
    const char* names[3] = {"standard", "rung 4", "rung 5"};
    std::string text[3];
    float text_w = 0;
    for (int i = 0; i < 3; ++i) {
      char buf[96];
      if (bytes[i] < 0) std::snprintf(buf, sizeof buf, "%s: refused (past its wall)", names[i]);
      else std::snprintf(buf, sizeof buf, "%s %.1f KiB", names[i], bytes[i] / 1024.0);
      text[i] = buf;
      text_w = std::max(text_w, ImGui::CalcTextSize(buf).x);
    }
    const float head_w = ImGui::CalcTextSize(head).x, gap = ui::px(10), inner = ui::px(6);
    const bool one_row = head_w + gap + 3.0f * (ui::px(40) + inner + text_w + gap) <= avail;
    const ImVec2 p0 = ImGui::GetCursorScreenPos();
    ImGui::Dummy(ImVec2(avail, line * (one_row ? 1.0f : 4.0f)));
    ImDrawList* dl = ImGui::GetWindowDrawList();
    dl->AddText(p0, ImGui::GetColorU32(ImGuiCol_TextDisabled), head);
    const float slot = one_row ? (avail - head_w - gap) / 3.0f : avail;
    const float bar_max = slot - text_w - inner - gap;
    // On one scale, the largest bar full (standard attention's is not always the largest: at small Lq and large d
    // rung 5 reads K and V more often than standard attention writes S and P, and its bar once ran over the next).
    const double top = std::max({t.unfused, bytes[1], t.flash, 1.0});
    for (int i = 0; i < 3; ++i) {
      const float x = one_row ? p0.x + head_w + gap + slot * float(i) : p0.x;
      const float y = one_row ? p0.y : p0.y + line * float(i + 1);
      const float w = bytes[i] < 0 ? 0.0f : std::max(2.0f, float(bytes[i] / top) * bar_max);
      if (w > 0) dl->AddRectFilled(ImVec2(x, y + font * 0.15f), ImVec2(x + w, y + font * 0.95f), colours[i]);
      const ImVec2 at(x + w + (w > 0 ? inner : 0.0f), y);
      dl->AddText(at, ImGui::GetColorU32(ImGuiCol_Text), text[i].c_str());
      // Each label inside its own slot (the layout audit: a bar too long once pushed one over the next).
      const ImVec2 size = ImGui::CalcTextSize(text[i].c_str());
      viz::audit::label("traffic strip", text[i], at, ImVec2(at.x + size.x, at.y + size.y), ImVec2(x, y),
                        ImVec2(one_row ? x + slot : p0.x + avail, y + line));
    }
  }

 private:
  // [SECTION] Compute -----------------------------------------------------------------------------------
  void compute(Backend b) {
    valid_ = false;
    run_error_.clear();
    adjust_note_.clear();
    composed_step_ = -1;
    try {
      run(b);
      valid_ = true;
      fresh_ = true;
    } catch (const std::exception& e) {
      run_error_ = ui::error_text(e);
    }
  }

  void run(Backend b) {
    res_ = fs::run(b, params_);
    // A chosen block or step the study moved inside the shape: the controls follow, the note says so.
    adjust_note_ = res_.adjust_note;
    if (res_.qblock != params_.get_int("qblock")) params_.set("qblock", std::to_string(res_.qblock));
    if (res_.step != params_.get_int("step")) params_.set("step", std::to_string(res_.step));
    computed_key_ = computed_key_.substr(0, computed_key_.rfind('/')) + "/" + params_.get_text("qblock");
    bm_ = res_.bm;
    bn_ = res_.bn;
    q_blocks_ = res_.q_blocks;
    steps_ = res_.steps;
    qblock_ = res_.qblock;

    // The final weights of the chosen block, composed from the trace at the last step.
    const int lk = int(res_.shape.lk);
    final_tex_.resize(lk, bm_, 2);
    partial_tex_.resize(lk, bm_, 2);
    o_tex_.resize(res_.shape.d, bm_, 1);
    fill_weights(b, final_tex_, steps_);
    using K = viz::ColorScale::Kind;
    const float top = float(std::max(res_.wmax, 1e-6));
    final_map_.set_scale({K::Sequential, 0, top, "weight"});
    partial_map_.set_scale({K::Sequential, 0, top, "weight"});
    o_map_.set_scale({K::Diverging, -float(res_.omax), float(res_.omax), "O / l"});
  }

  // Composes the chosen block's weights at `step` into a texture: on CUDA into the mapped buffer.
  void fill_weights(Backend b, viz::DataTexture& tex, int64_t step) {
    if (b == Backend::Cuda) {
      viz::DataTexture::begin_device_write_all({&tex});
      try {
        fs::compose(b, res_, step, tex.device_pointer());
      } catch (...) {
        viz::DataTexture::end_device_write_all({&tex});
        throw;
      }
      viz::DataTexture::end_device_write_all({&tex});
    } else {
      std::vector<float> w(size_t(bm_ * res_.shape.lk * 2));
      fs::compose(b, res_, step, w.data());
      tex.upload(w.data());
    }
  }

  void compose(Backend b, int64_t step) {
    composed_step_ = step;
    try {
      fill_weights(b, partial_tex_, step);
      o_tex_.upload(fs::partial_output(res_, step).data());  // O_t / l_t of the chosen block
      step_fresh_ = true;
    } catch (const std::exception& e) {
      run_error_ = ui::error_text(e);
      valid_ = false;
    }
  }

  // [SECTION] Stepper -------------------------------------------------------------------------------------
  void draw_stepper() {
    int64_t step = params_.get_int("step");
    auto set_step = [&](int64_t s) {
      s = std::clamp<int64_t>(s, 1, steps_);
      if (s != step) params_.set("step", std::to_string(s)), step = s;
    };
    if (ImGui::Button("|<")) set_step(1), playing_ = false;
    ImGui::SameLine();
    if (ImGui::Button("<")) set_step(step - 1), playing_ = false;
    ImGui::SameLine();
    if (ImGui::Button(playing_ ? "Pause" : "Play", ImVec2(ui::px(64), 0))) {
      playing_ = !playing_;
      if (playing_ && step >= steps_) set_step(1);
      last_tick_ = ImGui::GetTime();
    }
    ImGui::SameLine();
    if (ImGui::Button(">")) set_step(step + 1), playing_ = false;
    ImGui::SameLine();
    if (ImGui::Button(">|")) set_step(steps_), playing_ = false;
    ImGui::SameLine();
    int s = int(step);
    // No text inside the slider (its knob would cover it): the step is said beside it.
    ImGui::SetNextItemWidth(std::max(ui::px(80), std::min(ui::px(420), ImGui::GetContentRegionAvail().x * 0.4f)));
    if (ImGui::SliderInt("##scrub", &s, 1, int(steps_), "", ImGuiSliderFlags_AlwaysClamp)) set_step(s), playing_ = false;
    if (playing_ && ImGui::GetTime() - last_tick_ > 0.6) {
      last_tick_ = ImGui::GetTime();
      if (step >= steps_) playing_ = false;
      else set_step(step + 1);
    }
    if (playing_) ui::keep_drawing(std::max(0.0, 0.6 - (ImGui::GetTime() - last_tick_)));  // the next step's tick
    // Beside the slider where it fits, else under it.
    const std::string text = fs::step_view(res_, step).stepper_text;
    const float right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
    if (ImGui::GetItemRectMax().x + ui::px(14) + ImGui::CalcTextSize(text.c_str()).x <= right) ImGui::SameLine(0, ui::px(14));
    ui::wrapped(text);
  }

  // [SECTION] Tile grid ------------------------------------------------------------------------------------
  // Where the grid lies: the row labels from `o`, the tiles from `g0`, `gw` x `gh`, one `cw` x `ch` cell per
  // K/V tile and query block.
  struct TileGrid {
    ImVec2 o, g0;
    float gw, gh, cw, ch;
  };

  // The grid (hover a tile for what it is), the caption and the legend, `width` wide.
  void draw_tile_grid(float width, const char* which) {
    const int64_t step = params_.get_int("step");
    const float font = ImGui::GetFontSize();
    const float label_w = font * 2.2f;
    TileGrid g;
    g.gw = width - label_w;
    g.cw = g.gw / float(steps_);
    g.ch = std::clamp(ui::px(130) / float(q_blocks_), ui::px(6), ui::px(26));
    ImGui::Dummy(ImVec2(width, 1));
    g.o = ImGui::GetCursorScreenPos();
    g.g0 = ImVec2(g.o.x + label_w, g.o.y);
    g.gh = g.ch * float(q_blocks_);
    ImGui::InvisibleButton("tilegrid", ImVec2(width, g.gh + ui::px(3)));
    const bool hovered = ImGui::IsItemHovered();
    draw_tile_rows(g, step);
    draw_tile_boundaries(g);
    if (hovered) tile_tooltip(g, step);
    ImGui::SetCursorScreenPos(ImVec2(g.g0.x, ImGui::GetCursorScreenPos().y));
    wrapped_in(g.gw, (std::string("columns: K/V tiles 0.. (one per step) ->; rows: query blocks 0.. (") + which +
                      "; only it is stepped)").c_str(), true);
    draw_tile_legend(width);
  }

  // Each query block's row of tile states, the skipped run hatched, and its number on the left.
  void draw_tile_rows(const TileGrid& g, int64_t step) {
    const float font = ImGui::GetFontSize();
    const ImVec2 o = g.o, g0 = g.g0;
    const float gw = g.gw, cw = g.cw, ch = g.ch;
    // Row numbers on every row where they fit, else on every k-th row, never touching.
    const int64_t label_every = ch >= font * 1.05f ? 1 : int64_t(std::ceil(font * 1.1f / ch / 4.0f)) * 4;
    ImDrawList* dl = ImGui::GetWindowDrawList();
    for (int64_t qb = 0; qb < q_blocks_; ++qb) {
      const float y0 = g0.y + ch * float(qb), y1 = y0 + ch;
      // A row's states are runs: done [0, step-1), current, pending [step, run), skipped [run, steps). Only
      // the chosen block is stepped: the others are other programs, which run independently (no step
      // order between programs), so their computed tiles are one colour.
      int64_t run_end = 0;
      while (run_end < steps_ && res_.hstate[size_t(qb * steps_ + run_end)] == fa::kTileComputed) ++run_end;
      auto span = [&](int64_t a, int64_t b, ImU32 c) {
        if (b > a) dl->AddRectFilled(ImVec2(g0.x + cw * float(a), y0), ImVec2(g0.x + cw * float(b), y1), c);
      };
      const int64_t cur = step - 1;
      if (qb == qblock_) {
        span(0, std::min(cur, run_end), kDone);
        if (cur < run_end) span(cur, cur + 1, kCurrent);
        span(std::min(cur + 1, run_end), run_end, kPending);
      } else {
        span(0, run_end, kOther);
      }
      span(run_end, steps_, kSkipped);
      if (run_end < steps_) {  // hatch the skipped run
        dl->PushClipRect(ImVec2(g0.x + cw * float(run_end), y0), ImVec2(g0.x + gw, y1), true);
        for (float x = g0.x + cw * float(run_end) - ch; x < g0.x + gw; x += ui::px(6))
          dl->AddLine(ImVec2(x, y1), ImVec2(x + ch, y0), IM_COL32(90, 92, 100, 255));
        dl->PopClipRect();
      }
      char lbl[16];
      std::snprintf(lbl, sizeof lbl, "%" PRId64, qb);
      if (qb % label_every == 0)
        dl->AddText(ImVec2(o.x, std::max(o.y, y0 + (ch - font) * 0.5f)), ImGui::GetColorU32(ImGuiCol_TextDisabled), lbl);
    }
  }

  // Tile boundaries when they are wide enough to see, and the chosen block outlined.
  void draw_tile_boundaries(const TileGrid& g) {
    const ImVec2 g0 = g.g0;
    const float gw = g.gw, gh = g.gh, cw = g.cw, ch = g.ch;
    ImDrawList* dl = ImGui::GetWindowDrawList();
    if (cw >= 4.0f)
      for (int64_t t = 1; t < steps_; ++t)
        dl->AddLine(ImVec2(g0.x + cw * float(t), g0.y), ImVec2(g0.x + cw * float(t), g0.y + gh), IM_COL32(20, 21, 24, 255));
    if (ch >= 4.0f)
      for (int64_t qb = 1; qb < q_blocks_; ++qb)
        dl->AddLine(ImVec2(g0.x, g0.y + ch * float(qb)), ImVec2(g0.x + gw, g0.y + ch * float(qb)), IM_COL32(20, 21, 24, 255));
    dl->AddRect(ImVec2(g0.x - 1, g0.y + ch * float(qblock_) - 1), ImVec2(g0.x + gw + 1, g0.y + ch * float(qblock_ + 1) + 1),
                IM_COL32(255, 255, 255, 255), 0, 0, 2.0f);
  }

  // The hovered tile: its query block and rows, its K/V tile and keys, and what state it is in at `step`.
  void tile_tooltip(const TileGrid& g, int64_t step) {
    const ImVec2 m = ImGui::GetIO().MousePos;
    const int64_t t = int64_t((m.x - g.g0.x) / g.cw), qb = int64_t((m.y - g.g0.y) / g.ch);
    if (t < 0 || t >= steps_ || qb < 0 || qb >= q_blocks_) return;
    const uint8_t st = res_.hstate[size_t(qb * steps_ + t)];
    ImGui::SetTooltip("query block %" PRId64 " (rows %" PRId64 "..%" PRId64 "), K/V tile %" PRId64
                      ", folded in at step %" PRId64 " (keys %" PRId64 "..%" PRId64 ")\n%s",
                      qb, qb * bm_, std::min((qb + 1) * bm_, res_.shape.lq) - 1, t, t + 1, t * bn_,
                      std::min((t + 1) * bn_, res_.shape.lk) - 1,
                      st == fa::kTileSkipped ? "skipped: no row of this block sees any of these keys (causal)"
                      : qb != qblock_        ? "computed by this query block's own program: programs run "
                                               "independently, with no step order between them"
                      : t < step - 1         ? "done"
                      : t == step - 1        ? "current: being folded in at this step"
                                             : "pending");
  }

  // Legend: the swatches wrap onto the next line where the column ends.
  void draw_tile_legend(float width) {
    const float font = ImGui::GetFontSize();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const float right = ImGui::GetCursorScreenPos().x + width;
    bool first = true;
    auto swatch = [&](ImU32 c, const char* text) {
      const float w = font + ui::px(4) + ImGui::GetStyle().ItemSpacing.x + ImGui::CalcTextSize(text).x;
      if (!first) {
        ImGui::SameLine(0, ui::px(14));
        if (ImGui::GetCursorScreenPos().x + w > right) ImGui::NewLine();
      }
      first = false;
      const ImVec2 p = ImGui::GetCursorScreenPos();
      ImGui::Dummy(ImVec2(font + ui::px(4), font));
      dl->AddRectFilled(ImVec2(p.x, p.y + ui::px(3)), ImVec2(p.x + font, p.y + font + ui::px(1)), c);
      ImGui::SameLine();
      ImGui::TextUnformatted(text);
    };
    swatch(kDone, "done");
    swatch(kCurrent, "current");
    swatch(kPending, "pending");
    swatch(kOther, "other programs");
    swatch(IM_COL32(90, 92, 100, 255), "skipped (causal)");
  }

  // [SECTION] The chosen query block -------------------------------------------------------------------
  void draw_block(float width, int64_t step) {
    const fs::StepView v = fs::step_view(res_, step);
    const int rows = v.rows;
    const int64_t row0 = v.row0;
    column_section(width, v.title.c_str());
    std::vector<viz::Bar> mb, lb, ab;
    for (int r = 0; r < rows; ++r) {
      const bool mv = v.moved[size_t(r)];
      const std::string lbl;  // rows run left to right (see the caption); numbers do not fit 128 slots
      const float m = v.m[size_t(r)];
      // The hover names the row (the slots are too narrow for a label under them).
      const std::string row = "query row " + std::to_string(row0 + r) + (mv ? " (its max moved at this step)" : "");
      char tip[3][96];
      std::snprintf(tip[0], sizeof tip[0], "%s: m = %.6g", row.c_str(), double(m));
      std::snprintf(tip[1], sizeof tip[1], "%s: l = %.6g", row.c_str(), double(v.l[size_t(r)]));
      std::snprintf(tip[2], sizeof tip[2], "%s: alpha = %.6g", row.c_str(), double(v.alpha[size_t(r)]));
      mb.push_back({lbl, std::isfinite(m) ? double(m) : 0.0, mv ? kMoved : kSteady, tip[0]});
      lb.push_back({lbl, double(v.l[size_t(r)]), mv ? kMoved : kSteady, tip[1]});
      ab.push_back({lbl, double(v.alpha[size_t(r)]), mv ? kMoved : kSteady, tip[2]});
    }
    wrapped_in(width, v.caption.c_str(), true);
    // The three bar charts side by side where each has room for its title, else as many per row as fit.
    const float gap = ui::px(12), bh = ui::px(110);
    const int per_row = fit(width, 200, gap, 3);
    const float w3 = std::floor((width - gap * float(per_row - 1)) / float(per_row));
    viz::PlotOptions om, ol, oa;
    om.title = "m: running max per row";
    ol.title = "l: running sum per row";
    oa.title = "alpha applied at this step";
    oa.y_min = 0;
    oa.y_max = 1.05;
    viz::bar_chart("m-bars", mb, om, ImVec2(w3, bh));
    if (per_row > 1) ImGui::SameLine(0, gap);
    viz::bar_chart("l-bars", lb, ol, ImVec2(w3, bh));
    if (per_row > 2) ImGui::SameLine(0, gap);
    viz::bar_chart("alpha-bars", ab, oa, ImVec2(w3, bh));

    // Partial against final weights (same colour scale), composed from the trace.
    const float cb = partial_map_.colorbar_width();
    const float hw = width - cb - ui::px(4);
    const float hh = std::clamp(float(rows) * ui::px(6), ui::px(48), ui::px(96));
    wrapped_in(width, "weights so far: each earlier tile's P rescaled by every alpha since, over the running l");
    partial_map_.set_grid(bn_, 0);
    final_map_.set_grid(bn_, 0);
    viz::HeatmapHover hp = partial_map_.draw("partial", partial_tex_, ImVec2(hw, hh), fresh_ || step_fresh_);
    wrapped_in(width, "final weights (after the last step): the softmax of rung 4");
    viz::HeatmapHover hf = final_map_.draw("final", final_tex_, ImVec2(hw, hh), fresh_);
    for (const viz::HeatmapHover* h : {&hp, &hf})
      if (h->active && h->row < rows)
        ImGui::SetTooltip("query %" PRId64 ", key %d (K/V tile %d)", row0 + h->row, h->col, h->col / bn_);
  }

  // O_t / l_t, exact attention over the keys seen so far: its error against float64 over those keys (float32
  // rounding for the shipped kernel; an edit that breaks the online softmax shows here, tile by tile), and
  // its distance from the final output (the keys not yet folded in: not an error), then the study's line.
  void draw_partial(float width, int64_t step) {
    const fs::StepView v = fs::step_view(res_, step);
    const float gap = ui::px(12);
    column_section(width, "The partial output O_t / l_t: exact over the keys seen so far");
    const float ocb = o_map_.colorbar_width();
    const bool o_beside = width - gap - ocb - ui::px(100) >= ui::px(320);
    const float ow = o_beside ? ocb + std::clamp(width * 0.3f - ocb, ui::px(100), ui::px(260)) : width;
    viz::Series s, e;
    e.label = "error over the keys seen (float64)";
    s.label = "distance from the final O (keys not yet seen)";
    e.color = kRung5;
    s.color = IM_COL32(150, 150, 160, 255);
    for (int64_t t = 0; t < steps_; ++t) {
      e.x.push_back(double(t + 1));
      e.y.push_back(std::max(res_.step_error[size_t(t)], 1e-9));
      s.x.push_back(double(t + 1));
      s.y.push_back(std::max(res_.converge[size_t(t)], 1e-9));
    }
    viz::PlotOptions oc;
    oc.title = "relative to |O|: against float64 over the keys seen, and from the final output";
    oc.x_label = "step (K/V tiles folded in)";
    oc.log_y = true;
    oc.v_lines = {double(step)};
    oc.v_line_labels = {"now"};
    const float ph = ui::px(190);
    viz::line_plot("converge", {e, s}, oc, ImVec2(o_beside ? width - ow - gap : width, ph));
    if (o_beside) ImGui::SameLine(0, gap);
    ImGui::BeginGroup();
    wrapped_in(ow, "O_t / l_t  [rows x d]");
    const float oh = o_beside ? ph - ImGui::GetFontSize() - ui::px(6)
                              : std::clamp(float(v.rows) * ui::px(6), ui::px(48), ui::px(96));
    o_map_.draw("o-partial", o_tex_, ImVec2(ow - ocb, oh), fresh_ || step_fresh_);
    ImGui::EndGroup();
    wrapped_in(width, v.partial_line.c_str(), true);
    step_fresh_ = false;
  }

  // [SECTION] The IO argument: traffic against BLOCK_M, against M and against Lk -----------------------------
  // From the study's exact counts (fs::IoView): rung 5 against BLOCK_M with standard attention flat and rung
  // 4 one point at its BLOCK_M = 16 (absent past its wall); against M, the shared memory a block may have,
  // with Theorem 2's curve only where it applies; against Lk. Then the study's captions.
  void draw_io(float width) {
    const fs::IoView& io = res_.io;
    const fs::Traffic& t = res_.mem;
    const float gap = ui::px(12);
    const int per_row = fit(width, 300, gap, 3);
    const float pw = std::floor((width - gap * float(per_row - 1)) / float(per_row));
    // The colours are the traffic strip's above (no legends to crowd these plots), rung 4 as dots.
    wrapped_in(width, "colours as the traffic strip above (rung 4 as dots: it is rung 5 at BLOCK_M = 16); white: "
                      "Theorem 2 where it applies",
               true);
    const float ph = std::clamp(ImGui::GetContentRegionAvail().y - ui::px(4), ui::px(150), ui::px(300));
    io_against_block_m(ImVec2(pw, ph));
    if (per_row > 1) ImGui::SameLine(0, gap);
    io_against_m(ImVec2(pw, ph));
    if (per_row > 2) ImGui::SameLine(0, gap);
    io_against_lk(ImVec2(pw, ph));
    for (const std::string* c : {&io.caption_bm, &io.caption_m, &t.caption, &t.paper_line}) wrapped_in(width, c->c_str(), true);
  }
  // A flat line at y over x's range (standard attention's traffic, which no tile size changes).
  static viz::Series flat_series(const std::vector<double>& x, double y, ImU32 c) {
    viz::Series s;
    s.color = c;
    s.x = {x.front(), x.back()};
    s.y = {y, y};
    return s;
  }
  // Traffic against BLOCK_M at this shape: rung 5's curve, standard attention flat, rung 4 one point at 16.
  void io_against_block_m(const ImVec2& size) {
    const fs::IoView& io = res_.io;
    viz::Series r5;
    r5.color = kRung5;
    r5.x = io.block_m;
    r5.y = io.flash_by_bm_kib;
    std::vector<viz::Series> series = {flat_series(io.block_m, io.unfused_kib, kStd), r5};
    if (std::isfinite(io.smem_kib)) {
      viz::Series r4;
      r4.color = kRung4;
      r4.points = true;
      r4.x = {16};
      r4.y = {io.smem_kib};
      series.push_back(r4);
    }
    viz::PlotOptions o;
    o.title = "KiB against BLOCK_M (this shape)";
    o.x_label = "BLOCK_M";
    o.log_x = true;
    o.x_ticks = io.block_m;
    o.y_min = 0;
    o.v_lines = {double(bm_)};
    o.v_line_labels = {"now"};
    viz::line_plot("io-bm", series, o, size);
  }
  // Traffic against M, the shared memory a block may have: Theorem 2's curve only where it applies.
  void io_against_m(const ImVec2& size) {
    const fs::IoView& io = res_.io;
    viz::Series r5, r4, th;
    r5.color = kRung5;
    r5.x = io.m_kib;
    r5.y = io.m_flash_kib;
    r4.color = kRung4;
    r4.points = true;
    th.color = IM_COL32(230, 230, 230, 255);
    for (size_t i = 0; i < io.m_kib.size(); ++i) {
      if (std::isfinite(io.m_smem_kib[i])) r4.x.push_back(io.m_kib[i]), r4.y.push_back(io.m_smem_kib[i]);
      if (std::isfinite(io.m_theorem_kib[i])) th.x.push_back(io.m_kib[i]), th.y.push_back(io.m_theorem_kib[i]);
    }
    std::vector<viz::Series> series = {flat_series(io.m_kib, io.unfused_kib, kStd), r5};
    if (!r4.x.empty()) series.push_back(r4);
    if (!th.x.empty()) series.push_back(th);
    viz::PlotOptions o;
    o.title = "KiB against M, shared memory per block";
    o.x_label = "M (KiB)";
    o.log_x = o.log_y = true;
    o.v_lines = {io.device_m_kib, io.domain_end_kib};
    o.v_line_labels = {"this device", "M = N d"};
    viz::line_plot("io-m", series, o, size);
  }
  // Traffic against Lk: rung 4 as points (it equals rung 5 at BLOCK_M = 16: the lines would coincide), up to
  // its wall.
  void io_against_lk(const ImVec2& size) {
    const fs::Traffic& t = res_.mem;
    viz::Series ts, t4, t5;
    ts.color = kStd;
    t4.color = kRung4;
    t4.points = true;
    t5.color = kRung5;
    for (size_t i = 0; i < t.lk.size(); ++i) {
      ts.x.push_back(t.lk[i]), ts.y.push_back(t.unfused_kib[i]);
      t5.x.push_back(t.lk[i]), t5.y.push_back(t.flash_kib[i]);
      if (std::isfinite(t.smem_kib[i])) t4.x.push_back(t.lk[i]), t4.y.push_back(t.smem_kib[i]);
    }
    viz::PlotOptions o;
    o.title = "KiB against Lk (this Lq, BLOCK_M)";
    o.x_label = "Lk";
    o.log_x = o.log_y = true;
    o.v_lines = {double(res_.wall), double(res_.shape.lk)};
    o.v_line_labels = {"wall", "Lk"};
    viz::line_plot("io-lk", {ts, t4, t5}, o, size);
  }

  // [SECTION] Shared memory: rung 4 against rung 5 ------------------------------------------------------------
  void draw_smem(float width, Backend backend) {
    const int d = res_.shape.d;
    const int64_t lim = std::max<int64_t>(res_.limit, 1);
    const int64_t wall = res_.wall;
    viz::Series r4, r5, sl;
    r4.label = "rung 4: K+V+Q rows";
    r5.label = "rung 5: a tile";
    sl.label = "limit";
    r4.color = kRung4;
    r5.color = kRung5;
    sl.color = IM_COL32(200, 200, 200, 160);
    for (int64_t x = 16; x <= 65536; x *= 2) {
      r4.x.push_back(double(x));
      r4.y.push_back(double(attention::smem_bytes(x, d)) / 1024.0);
      r5.x.push_back(double(x));
      r5.y.push_back(double(fa::smem_bytes(bm_, bn_, d)) / 1024.0);
    }
    sl.x = {16, 65536};
    sl.y = {double(lim) / 1024.0, double(lim) / 1024.0};
    viz::PlotOptions o;
    o.title = "shared memory per block (KiB)";
    o.x_label = "Lk";
    o.log_x = o.log_y = true;
    o.v_lines = {double(wall), double(res_.shape.lk)};
    o.v_line_labels = {"wall", "Lk"};
    const float gap = ui::px(12);
    const bool pair = fit(width, 300, gap, 2) == 2;
    const float half = pair ? std::floor((width - gap) * 0.45f) : width;
    ImGui::BeginGroup();
    viz::line_plot("mem-onchip", {r4, r5, sl}, o, ImVec2(half, ui::px(220)));
    ImGui::EndGroup();
    if (pair) ImGui::SameLine(0, gap);
    ImGui::BeginGroup();
    draw_budget(pair ? width - half - gap : width);
    ImGui::EndGroup();

    // The same algorithm at full speed (`--variant fast`): its compile-time tile shapes.
    if (fa::fast_head_dim(d)) {
      // The default on an H100/H200 picks its kernel by shape: the one it takes at this panel's shape.
      fa::FastParams here;
      here.Lq = int(res_.shape.lq), here.Lk = int(res_.shape.lk), here.d = d;
      here.causal = params_.get_int("causal") != 0;
      auto line = [&](fa::FastPath path, const char* where) {
        const fa::FastPath kernel = fa::fast_kernel_for(path, here);
        const fa::FastTileShape t = fa::fast_tile_shape(d, kernel);
        const std::string q = t.q_tiles > 1 ? ", " + std::to_string(t.q_tiles) + " Q tiles" : "";
        char buf[320];
        std::snprintf(buf, sizeof buf, "fast, %s (%s%s): %d x %d tiles, %d warps, %d stages%s, %s of tiles",
                      fa::fast_path_name(kernel), where, kernel != path ? ", at this shape" : "", t.block_m, t.block_n,
                      t.warps, t.stages, q.c_str(), mem::bytes_text(uint64_t(t.smem_bytes)).c_str());
        wrapped_in(width, buf, true);
      };
      if (backend == Backend::Cuda) {
        try {
          line(fa::fast_path(), "this device");
        } catch (const std::exception& e) {
          wrapped_in(width, (std::string("fast variant: ") + e.what()).c_str(), true);
        }
      } else {
        line(fa::FastPath::WgmmaByShape, "H100/H200");
        line(fa::FastPath::MmaSync, "other GPUs");
      }
    }
  }

  // The shared-memory budget bars (the study's fs::budgets): each tile's bytes by part on one scale, the
  // limit as a line; a bar past it is drawn red past the line. Then the study's caption.
  void draw_budget(float width) {
    if (res_.budget.empty()) return;
    const ImU32 part_col[6] = {IM_COL32(90, 150, 230, 255), IM_COL32(235, 170, 70, 255), IM_COL32(90, 200, 140, 255),
                               IM_COL32(200, 120, 220, 255), IM_COL32(120, 200, 220, 255), IM_COL32(170, 170, 170, 255)};
    double scale_max = double(res_.limit);
    for (const fs::Budget& b : res_.budget) scale_max = std::max(scale_max, double(b.total));
    const float bar_h = ui::px(14);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    wrapped_in(width, "shared-memory budget per block, by part (white line: the limit; red: past it)");
    for (const fs::Budget& b : res_.budget) {
      char head[200];
      std::snprintf(head, sizeof head, "%s: %s of %s%s", b.label.c_str(), mem::bytes_text(uint64_t(b.total)).c_str(),
                    mem::bytes_text(uint64_t(b.limit)).c_str(), b.fits ? "" : " -- does not fit");
      wrapped_in(width, head, b.fits);
      const ImVec2 p0 = ImGui::GetCursorScreenPos();
      const float px_per_byte = float(double(width) / scale_max);
      float x = p0.x;
      for (size_t i = 0; i < b.parts.size(); ++i) {
        const float w = float(double(b.parts[i].bytes)) * px_per_byte;
        dl->AddRectFilled(ImVec2(x, p0.y), ImVec2(x + w, p0.y + bar_h), part_col[i % 6]);
        const ImVec2 ts = ImGui::CalcTextSize(b.parts[i].name.c_str());
        if (ts.x + ui::px(4) < w)
          dl->AddText(ImVec2(x + ui::px(2), p0.y + (bar_h - ts.y) * 0.5f), IM_COL32(20, 20, 20, 255), b.parts[i].name.c_str());
        x += w;
      }
      const float lim_x = p0.x + float(double(b.limit)) * px_per_byte;
      if (!b.fits) dl->AddRectFilled(ImVec2(lim_x, p0.y + bar_h * 0.8f), ImVec2(x, p0.y + bar_h), IM_COL32(230, 60, 60, 255));
      dl->AddLine(ImVec2(lim_x, p0.y - ui::px(2)), ImVec2(lim_x, p0.y + bar_h + ui::px(2)), IM_COL32(240, 240, 240, 255),
                  ui::px(2));
      ImGui::Dummy(ImVec2(width, bar_h + ui::px(4)));
    }
    wrapped_in(width, res_.budget_caption.c_str(), true);
  }

  ParamValues params_;
  std::string control_error_, run_error_, computed_key_, adjust_note_, view_forced_;
  fs::Result res_;
  int bm_ = 16, bn_ = 16;
  int64_t q_blocks_ = 0, steps_ = 0, qblock_ = 0, composed_step_ = -1;
  viz::DataTexture partial_tex_, final_tex_, o_tex_;
  viz::Heatmap partial_map_, final_map_, o_map_;
  bool valid_ = false, fresh_ = false, step_fresh_ = false, playing_ = false;
  double last_tick_ = 0;
  TimelineView inside_{timeline::kForward};  // issue 30: "Inside the fast kernel"
};

}  // namespace

std::unique_ptr<Panel> make_flash_attention_panel() { return std::make_unique<FlashAttentionPanel>(); }

}  // namespace kl::app
