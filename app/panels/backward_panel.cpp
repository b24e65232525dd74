// Rung 6 panel: the backward pass, drawn from the backward study (kernels/studies/
// flash_attention_backward_study.h), which runs the teaching kernel with its trace. This file only fills
// textures and draws. The notice line, the controls and the checks, then tabs (the `view` parameter):
// what the backward saves (L against P, the naive wall), the tiles, the errors, the checks.
//   [SECTION] Panel state and controls
//   [SECTION] Textures from the study's result
//   [SECTION] Stepper: the query tiles of the chosen program
//   [SECTION] Saved state and the wall
//   [SECTION] Tile order: K/V tiles outer, query tiles inner
//   [SECTION] The current tile beside the tile order: recomputed P, dS; dK and Q_i with the lineage;
//             the errors as tiles fold in
#include <imgui.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>

#include "app/panels/panels.h"
#include "app/panels/memory_access_view.h"
#include "app/panels/timeline_view.h"  // issue 30: "Inside the fast kernel"
#include "app/notice.h"
#include "app/ui.h"
#include "kernels/runtime/buffer.h"
#include "kernels/studies/flash_attention_backward_study.h"
#include "viz/data_texture.h"
#include "viz/heatmap.h"
#include "viz/plot.h"

namespace kl::app {
namespace {

namespace bws = flash_attention_backward_study;
namespace fab = flash_attention_backward;

const ImU32 kDone = IM_COL32(74, 130, 199, 255);
const ImU32 kCurrent = IM_COL32(236, 172, 62, 255);
const ImU32 kPending = IM_COL32(58, 61, 70, 255);
const ImU32 kOther = IM_COL32(64, 112, 108, 255);  // computed by another program
const ImU32 kSkipped = IM_COL32(18, 18, 20, 255);
const ImU32 kHatch = IM_COL32(90, 92, 100, 255);

// A heading that wraps (inside a column: at the column's edge) with a rule as wide as `width` (0: the
// content region), so neither runs into the view beside it.
void heading(const char* title, float width = 0) {
  ImGui::Spacing();
  ImGui::PushStyleColor(ImGuiCol_Text, IM_COL32(242, 204, 102, 255));
  ui::wrapped(title);  // between words: a number never breaks across lines
  ImGui::PopStyleColor();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const float w = width > 0 ? width : ImGui::GetContentRegionAvail().x;
  ImGui::GetWindowDrawList()->AddLine(ImVec2(p.x, p.y + 1), ImVec2(p.x + w, p.y + 1),
                                      ImGui::GetColorU32(ImGuiCol_Separator));
  ImGui::Dummy(ImVec2(w, ImGui::GetStyle().ItemSpacing.y));
}

// A study sentence, wrapped at the current wrap position (a column's edge inside a column).
void sentence(const std::string& text) {
  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetColorU32(ImGuiCol_TextDisabled));
  ui::wrapped(text);
  ImGui::PopStyleColor();
}

// [SECTION] Panel state and controls ------------------------------------------------------------------

class BackwardPanel : public Panel {
 public:
  // The study's list, and the timeline view's two (issue 30).
  BackwardPanel() : params_(TimelineView::with_params(bws::params(), timeline::kBackward)) {}
  std::string id() const override { return "backward"; }
  std::string title() const override { return "6 · Backward"; }
  ParamValues& params() override { return params_; }
  SourceFocus source_focus() const override {
    if (params_.get_text("view") == "inside") return inside_.source_focus(params_);  // the recorded fast kernel's
    return {"flash_attention_backward.cu", {"backward_teaching"}};
  }
  std::vector<TourStop> tour_stops() const override {
    // The stops keep their names (the tour's file names); the first opens on what the backward saves.
    return {{"step2", {}}, {"step0", {"view=tiles", "q_tile=0"}},
            {"non-causal", {"view=errors", "causal=0", "kv_tile=2", "q_tile=1"}}};
  }

  // Laid out for a 1280x720 projector: the notice, the controls, the checks in one line, then tabs; the
  // first tab is what the backward saves (L against P, the naive wall), which the notice talks about.
  // Another view is one more BeginTabItem block in draw_tabs().
  void draw(AppContext& ctx) override {
    const Backend b = ctx.backend.backend;
    const std::string key = ui::settings_key(
        params_, {"lq", "lk", "d", "causal", "block_m", "block_n", "kv_tile", "q_tile", "seed"}, b);
    if (key != computed_key_) {
      computed_key_ = key;
      compute(b);
    }
    // On the Timeline tab (a recording of the fast kernel) the notice line says what the recording shows, not
    // what this rung's study found, and the controls, which set nothing it draws, are greyed out.
    const bool recorded = params_.get_text("view") == "inside";
    if (valid_) notice(recorded ? inside_.notice(params_) : r_.notice);
    ui::begin_not_here(recorded);
    ImGui::PushItemWidth(96);
    ui::param_row(params_, {"lq", "lk", "d", "causal", "block_m", "block_n", "kv_tile", "seed"}, &control_error_, 12);
    ImGui::PopItemWidth();
    ui::end_not_here(recorded, TimelineView::kPanelControlsNote);
    ui::error_box(control_error_);
    if (!run_error_.empty()) {
      ui::error_box(run_error_);
      return;
    }
    if (!valid_) return;
    checks_summary(report_.checks);
    draw_tabs(ctx);
    if (ImGui::CollapsingHeader("What you are looking at")) ui::explain("backward.md");
  }

  void draw_tabs(AppContext& ctx) {
    ViewTabs tabs("backward-views", params_, "view", view_forced_);
    if (tabs.item("What it saves", "saves")) {
      draw_saved_state();
      tabs.end_item();
    }
    if (tabs.item("Tiles", "tiles")) {
      // The tiles first (at 1280x720 under the source pane only they fit), then issue 31's sectors per request of
      // this rung's main loads and stores (app/panels/memory_access_view.h).
      draw_stepper();
      draw_tiles();
      draw_lineage();
      draw_memory_access(ctx.backend.backend, "backward", params_);
      tabs.end_item();
    }
    if (tabs.item("Errors", "errors")) {
      draw_convergence();
      tabs.end_item();
    }
    if (tabs.item("Checks", "checks")) {
      for (const study::Check& c : report_.checks) ui::status_line("", c.sentence, c.pass);
      tabs.end_item();
    }
    if (tabs.item("Timeline", "inside")) {  // issue 30: the fast backward's recorded timeline
      inside_.draw(ctx, &params_);
      tabs.end_item();
    }
    tabs.end();
  }

 private:
  // [SECTION] Textures from the study's result -----------------------------------------------------------
  void compute(Backend b) {
    valid_ = false;
    run_error_.clear();
    try {
      r_ = bws::run(b, params_);
      report_ = bws::report(r_);
      fill();
      valid_ = true;
    } catch (const std::exception& e) {
      run_error_ = ui::error_text(e);
    }
  }

  // Cell state of (row, key) of the current tile pair: masked past Lq / Lk and where causality hides it.
  float state(int row, int jj) const {
    const int64_t i = r_.q_tile * r_.block_m + row, j = r_.kv_tile * r_.block_n + jj;
    if (i >= r_.s.lq || j >= r_.s.lk) return float(viz::kCellOutside);
    return j < attention::visible_keys(i, r_.s.lq, r_.s.lk, r_.o.causal) ? float(viz::kCellNormal)
                                                                          : float(viz::kCellMasked);
  }

  void fill_tile(viz::DataTexture& tex, const float* values) {
    const int bm = r_.block_m, bn = r_.block_n;
    std::vector<float> cells(size_t(bm * bn * 2));
    for (int row = 0; row < bm; ++row)
      for (int jj = 0; jj < bn; ++jj) {
        cells[size_t((row * bn + jj) * 2)] = values[row * bn + jj];
        cells[size_t((row * bn + jj) * 2 + 1)] = state(row, jj);
      }
    tex.resize(bn, bm, 2);
    tex.upload(cells.data());
  }

  static float abs_max(const float* v, size_t n) {
    float m = 1e-12f;
    for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(v[i]));
    return m;
  }

  void fill() {
    using K = viz::ColorScale::Kind;
    const int bm = r_.block_m, bn = r_.block_n, d = r_.d;
    const size_t tile = size_t(bm * bn);
    const float* p = r_.p_recomputed.data() + r_.q_tile * int64_t(tile);
    const float* ds = r_.ds.data() + r_.q_tile * int64_t(tile);
    fill_tile(p_tex_, p);
    fill_tile(ds_tex_, ds);
    const float pmax = std::max(abs_max(p, tile), abs_max(r_.p_forward.data(), tile));
    p_map_.set_scale({K::Sequential, 0, pmax, "P"});
    const float dsmax = abs_max(ds, tile);
    ds_map_.set_scale({K::Diverging, -dsmax, dsmax, "dS"});
    const float* dk = r_.dk_partial.data() + r_.q_tile * bn * d;
    std::vector<float> cells(size_t(bn * d * 2));
    for (int jj = 0; jj < bn; ++jj)
      for (int c = 0; c < d; ++c) {
        const bool in = r_.kv_tile * bn + jj < r_.s.lk;
        cells[size_t((jj * d + c) * 2)] = dk[jj * d + c];
        cells[size_t((jj * d + c) * 2 + 1)] = float(in ? viz::kCellNormal : viz::kCellOutside);
      }
    dk_tex_.resize(d, bn, 2);
    dk_tex_.upload(cells.data());
    float dkmax = 1e-12f;
    for (double x : r_.dk_ref_tile) dkmax = std::max(dkmax, float(std::fabs(x)));
    dk_map_.set_scale({K::Diverging, -dkmax, dkmax, "dK_j so far"});
    std::vector<float> qc(size_t(bm * d * 2));
    for (int row = 0; row < bm; ++row)
      for (int c = 0; c < d; ++c) {
        const bool in = r_.q_tile * bm + row < r_.s.lq;
        qc[size_t((row * d + c) * 2)] = r_.q_rows[size_t(row * d + c)];
        qc[size_t((row * d + c) * 2 + 1)] = float(in ? viz::kCellNormal : viz::kCellOutside);
      }
    q_tex_.resize(d, bm, 2);
    q_tex_.upload(qc.data());
    const float qmax = abs_max(r_.q_rows.data(), r_.q_rows.size());
    q_map_.set_scale({K::Diverging, -qmax, qmax, "Q"});
  }

  // [SECTION] Stepper ------------------------------------------------------------------------------------
  void draw_stepper() {
    sentence("program j (K/V tile " + std::to_string(r_.kv_tile) + ", the kv_tile control) walks its query tiles i:");
    const int64_t steps = r_.q_blocks, step = r_.q_tile;
    auto set_step = [&](int64_t s) {
      s = std::clamp<int64_t>(s, 0, steps - 1);
      if (s != step) params_.set("q_tile", std::to_string(s));
    };
    if (ImGui::Button("|<")) set_step(0);
    ImGui::SameLine();
    if (ImGui::Button("<")) set_step(step - 1);
    ImGui::SameLine();
    if (ImGui::Button(">")) set_step(step + 1);
    ImGui::SameLine();
    if (ImGui::Button(">|")) set_step(steps - 1);
    ImGui::SameLine();
    int s = int(step);
    char fmt[64];
    std::snprintf(fmt, sizeof fmt, "query tile %%d of 0..%" PRId64, steps - 1);
    const float room = ImGui::GetContentRegionAvail().x;
    if (room < ui::px(160)) ImGui::NewLine();  // the slider under the buttons where it would be cramped
    ImGui::SetNextItemWidth(std::min(ui::px(420), std::max(ImGui::GetContentRegionAvail().x, ui::px(80))));
    if (ImGui::SliderInt("##qtile", &s, 0, int(steps - 1), fmt, ImGuiSliderFlags_AlwaysClamp)) set_step(s);
    const uint8_t st = r_.tile_state[size_t(r_.kv_tile * r_.q_blocks + step)];
    char where[160];
    std::snprintf(where, sizeof where, "rows %" PRId64 "..%" PRId64 " x keys %" PRId64 "..%" PRId64 "%s",
                  step * r_.block_m, std::min((step + 1) * r_.block_m, r_.s.lq) - 1, r_.kv_tile * r_.block_n,
                  std::min((r_.kv_tile + 1) * r_.block_n, r_.s.lk) - 1,
                  st == fab::kTileSkipped ? ": skipped (no row sees these keys)" : "");
    const float w = ImGui::CalcTextSize(where).x + ui::px(20);
    const float right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
    if (right - ImGui::GetItemRectMax().x > w)
      ImGui::SameLine(0, ui::px(20));
    sentence(where);
  }

  // [SECTION] Saved state and the wall ----------------------------------------------------------------------
  // What each backward keeps, at this shape (bars, log scale) and against L (the naive one's 8 L^2 bytes
  // crossing the memory available: its wall), then the study's sentences.
  void draw_saved_state() {
    const ui::ColumnsLayout c = ui::columns_or_stack(2, 300.0f);
    // Both plots above the fold where the panel leaves room (the sentences under them can scroll).
    const float rows = c.per_row == 1 ? 2.0f : 1.0f;
    const float h = std::clamp((ImGui::GetContentRegionAvail().y - ui::px(6)) / rows, ui::px(150), ui::px(300));
    ui::column_begin(c, 0);
    viz::PlotOptions po;
    po.title = "kept for the backward, this shape (KiB, log)";
    po.log_y = true;
    viz::bar_chart("saved", {{"L (FlashAttention)", double(r_.lse_bytes) / 1024.0, kDone},
                             {"P (naive)", double(r_.p_bytes) / 1024.0, kCurrent},
                             {"P + dP (naive)", double(r_.naive_bytes) / 1024.0, IM_COL32(200, 80, 70, 255)}},
                   po, ImVec2(c.width, h));
    ui::column_end();
    ui::column_begin(c, 1);
    const bws::Curve cv = bws::saved_curve(r_);
    const ImU32 colours[3] = {IM_COL32(200, 80, 70, 255), kDone, IM_COL32(200, 200, 200, 200)};
    std::vector<viz::Series> series;
    for (size_t i = 0; i < cv.y.size(); ++i) {
      viz::Series s;
      s.label = cv.labels[i];
      s.color = colours[i];
      s.x = cv.x;
      s.y = cv.y[i];
      series.push_back(s);
    }
    viz::PlotOptions lo;
    lo.title = "against L = Lq = Lk (bytes)";
    lo.x_label = cv.x_label;
    lo.log_x = lo.log_y = true;
    lo.v_lines = {cv.now};
    lo.v_line_labels = {"naive wall"};
    viz::line_plot("saved-vs-l", series, lo, ImVec2(c.width, h));
    ui::column_end();
    const std::string text = "P and dP " + mem::bytes_text(r_.naive_bytes) + " of " +
                             mem::bytes_text(r_.wall.available) +
                             (r_.backend == Backend::Cuda ? " free" : " available");
    viz::budget_bar("wall", double(r_.naive_bytes), double(std::max<uint64_t>(r_.wall.available, 1)), text,
                    ImVec2(ImGui::GetContentRegionAvail().x, ImGui::GetFrameHeight()));
    for (size_t i : {bws::kLineSaved, bws::kLineWall, bws::kLineRefusal}) sentence(report_.lines[i]);
  }

  // [SECTION] Tile order -------------------------------------------------------------------------------------
  ImU32 tile_colour(int64_t kb, int64_t qb) const {
    const uint8_t st = r_.tile_state[size_t(kb * r_.q_blocks + qb)];
    if (st == fab::kTileSkipped) return kSkipped;
    if (kb != r_.kv_tile) return kOther;
    return qb < r_.q_tile ? kDone : qb == r_.q_tile ? kCurrent : kPending;
  }

  static void hatch(ImDrawList* dl, ImVec2 a, ImVec2 z) {
    const float h = z.y - a.y, step = ui::px(6);
    dl->PushClipRect(a, z, true);
    for (float x = a.x - h; x < z.x; x += step) dl->AddLine(ImVec2(x, z.y), ImVec2(x + h, a.y), kHatch);
    dl->PopClipRect();
  }

  void draw_tile_grid(float width) {
    sentence("tile order: one program per K/V tile (columns), query tiles inner (rows)");
    const float cw = width / float(r_.k_blocks);
    const float ch = std::clamp(ui::px(180) / float(r_.q_blocks), ui::px(6), ui::px(28));
    const ImVec2 g0 = ImGui::GetCursorScreenPos();
    const float gh = ch * float(r_.q_blocks);
    ImGui::InvisibleButton("tilegrid", ImVec2(width, gh));
    const bool hovered = ImGui::IsItemHovered();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    for (int64_t kb = 0; kb < r_.k_blocks; ++kb)
      for (int64_t qb = 0; qb < r_.q_blocks; ++qb) {
        const ImVec2 a(g0.x + cw * float(kb), g0.y + ch * float(qb)), z(a.x + cw, a.y + ch);
        dl->AddRectFilled(a, z, tile_colour(kb, qb));
        if (r_.tile_state[size_t(kb * r_.q_blocks + qb)] == fab::kTileSkipped) hatch(dl, a, z);
        if (cw >= 4.0f && ch >= 4.0f) dl->AddRect(a, z, IM_COL32(20, 21, 24, 255));
      }
    // The current program's outline, inside the grid's rectangle.
    dl->AddRect(ImVec2(g0.x + cw * float(r_.kv_tile) + 1, g0.y + 1),
                ImVec2(g0.x + cw * float(r_.kv_tile + 1) - 1, g0.y + gh - 1), IM_COL32(255, 255, 255, 255), 0, 0,
                2.0f);
    if (hovered) {
      const ImVec2 m = ImGui::GetIO().MousePos;
      const int64_t kb = int64_t((m.x - g0.x) / cw), qb = int64_t((m.y - g0.y) / ch);
      if (kb >= 0 && kb < r_.k_blocks && qb >= 0 && qb < r_.q_blocks)
        ImGui::SetTooltip("program %" PRId64 " (keys %" PRId64 "..%" PRId64 "), query tile %" PRId64 "\n%s", kb,
                          kb * r_.block_n, std::min((kb + 1) * r_.block_n, r_.s.lk) - 1, qb,
                          r_.tile_state[size_t(kb * r_.q_blocks + qb)] == fab::kTileSkipped
                              ? "skipped: no row of this query tile sees these keys (causal)"
                              : "computed: P recomputed from L, dK_j dV_j += ..., dQ_i += ... (atomics on CUDA)");
    }
    draw_legend(width);
  }

  // The grid's key: swatches that wrap onto the next line at the column's edge.
  void draw_legend(float width) {
    const float font = ImGui::GetFontSize(), gap = ui::px(12);
    const float x_end = ImGui::GetCursorScreenPos().x + width;
    ImDrawList* dl = ImGui::GetWindowDrawList();
    bool first = true;
    auto swatch = [&](ImU32 c, const char* text, bool hatched) {
      const float w = font + ui::px(4) + ImGui::GetStyle().ItemSpacing.x + ImGui::CalcTextSize(text).x;
      // Beside the previous swatch where it fits, else on the next line (deciding before SameLine, so
      // the group never reaches past x_end).
      if (!first && ImGui::GetItemRectMax().x + gap + w <= x_end) ImGui::SameLine(0, gap);
      first = false;
      const ImVec2 p = ImGui::GetCursorScreenPos();
      const ImVec2 a(p.x, p.y + font * 0.15f), z(p.x + font, p.y + font * 0.95f);
      dl->AddRectFilled(a, z, c);
      if (hatched) hatch(dl, a, z);
      ImGui::Dummy(ImVec2(font + ui::px(4), font));
      ImGui::SameLine();
      ImGui::TextUnformatted(text);
    };
    swatch(kDone, "done", false);
    swatch(kCurrent, "current", false);
    swatch(kPending, "pending", false);
    swatch(kOther, "other programs", false);
    swatch(kSkipped, "skipped (causal)", true);
  }

  // [SECTION] The current tile --------------------------------------------------------------------------------
  // A heatmap with its caption in column i of `c`, the image as wide as the column leaves beside the
  // colour bar (at most `max_side`), `aspect` rows per column.
  viz::HeatmapHover tile_view(const ui::ColumnsLayout& c, int i, const char* caption, const char* id,
                              viz::Heatmap& map, viz::DataTexture& tex, float aspect, float max_side) {
    ui::column_begin(c, i);
    sentence(caption);
    const float w = std::max(ui::px(40), std::min(ui::px(max_side), c.width - map.colorbar_width()));
    // At least 110 px high (scale 1): a wide tile (32 keys x d = 128) keeps room for its colour bar and label, its
    // cells taller than wide.
    const float h = std::max(ui::px(110), std::min(w * aspect, ui::px(max_side)));
    const viz::HeatmapHover hv = map.draw(id, tex, ImVec2(w, h));
    ui::column_end();
    return hv;
  }

  // The tile grid beside the current tile pair's views (stacking two by two, then one by one, as the
  // panel narrows), then the sentences about them.
  void draw_tiles() {
    const float aspect = float(r_.block_m) / float(r_.block_n);
    const ui::ColumnsLayout c = ui::columns_or_stack(3, 200.0f);
    ui::column_begin(c, 0);
    draw_tile_grid(c.width);
    ui::column_end();
    // The forward's P is the same tile to float32 rounding: one picture and the number, not two pictures.
    const size_t tile = size_t(r_.block_m * r_.block_n);
    char cap[160];
    std::snprintf(cap, sizeof cap, "recomputed P = exp(S - L) (the forward's P to %.1e)", r_.p_max_abs_diff);
    tile_tip(tile_view(c, 1, cap, "p", p_map_, p_tex_, aspect, 260), "recomputed P",
             r_.p_recomputed.data() + r_.q_tile * int64_t(tile));
    tile_tip(tile_view(c, 2, "dS = P (dP - D): its signs", "ds", ds_map_, ds_tex_, aspect, 260), "dS",
             r_.ds.data() + r_.q_tile * int64_t(tile));
    for (size_t i : {bws::kLineDs, bws::kLineOrder, bws::kLineDq}) sentence(report_.lines[i]);
  }

  // The hovered cell of a tile view: which query row and key it is, and its value (or why it has none).
  void tile_tip(const viz::HeatmapHover& h, const char* what, const float* v) const {
    if (!h.active) return;
    const int64_t i = r_.q_tile * r_.block_m + h.row, j = r_.kv_tile * r_.block_n + h.col;
    const float st = state(h.row, h.col);
    if (st == float(viz::kCellOutside)) ImGui::SetTooltip("%s: past the end (row %" PRId64 ", key %" PRId64 ")", what, i, j);
    else if (st == float(viz::kCellMasked))
      ImGui::SetTooltip("%s[row %" PRId64 ", key %" PRId64 "]: masked (causal: the key comes after the query)", what, i, j);
    else ImGui::SetTooltip("%s[row %" PRId64 ", key %" PRId64 "] = %.4g", what, i, j, double(v[h.row * r_.block_n + h.col]));
  }

  // dK_j after this step beside Q_i; hovering a dK cell highlights the dS column and the Q column it
  // is summed from. Then the errors as tiles fold in.
  void draw_lineage() {
    heading("dK_j after this step and Q_i (hover dK: where a cell comes from)");
    const ui::ColumnsLayout c = ui::columns_or_stack(2, 220.0f);
    const viz::HeatmapHover hv =
        tile_view(c, 0, "dK_j so far: keys x d", "dk", dk_map_, dk_tex_, float(r_.block_n) / float(r_.d), 240);
    const viz::HeatmapHover hq =
        tile_view(c, 1, "Q_i: query rows x d", "q", q_map_, q_tex_, float(r_.block_m) / float(r_.d), 240);
    if (hv.active) {
      const float dk = r_.dk_partial[size_t((r_.q_tile * r_.block_n + hv.row) * r_.d + hv.col)];
      ImGui::SetTooltip("dK[key %" PRId64 ", %d] = %.4g after query tile %" PRId64 "\n"
                        "= scale * sum over query rows i of dS[i, key] * Q[i, %d]:\n"
                        "dS column %d of every query tile (highlighted in dS for this one) and column %d of Q_i",
                        r_.kv_tile * r_.block_n + hv.row, hv.col, double(dk), r_.q_tile, hv.col, hv.row, hv.col);
      ds_map_.set_highlight(-1, hv.row);
      p_map_.set_highlight(-1, hv.row);
      q_map_.set_highlight(-1, hv.col);
    } else {
      ds_map_.set_highlight(-1, -1);
      p_map_.set_highlight(-1, -1);
      q_map_.set_highlight(-1, -1);
    }
    if (hq.active)
      ImGui::SetTooltip("Q[row %" PRId64 ", %d]", r_.q_tile * r_.block_m + hq.row, hq.col);
  }

  // The errors as tiles fold in: dK_j and dV_j against query tiles folded in, dQ_i against programs folded
  // in (two axes, so two plots), each from 1 (the study's curves).
  void draw_convergence() {
    const ui::ColumnsLayout c = ui::columns_or_stack(2, 280.0f);
    const float h = std::max(ui::px(180), std::min(ui::px(300), ImGui::GetContentRegionAvail().y - ui::px(80)));
    const ImU32 colours[2] = {kCurrent, kDone};
    int i = 0;
    for (const bws::Curve& cv : {bws::dkdv_curve(r_), bws::dq_curve(r_)}) {
      std::vector<viz::Series> series;
      for (size_t k = 0; k < cv.y.size(); ++k) {
        viz::Series s;
        s.label = cv.labels[k];
        s.color = cv.y.size() == 1 ? IM_COL32(120, 200, 120, 255) : colours[k];
        s.x = cv.x;
        for (double e : cv.y[k]) s.y.push_back(std::max(e, 1e-9));
        series.push_back(s);
      }
      viz::PlotOptions po;
      po.title = cv.title;
      po.log_y = true;
      po.x_label = cv.x_label;
      po.y_label = "relative error";
      po.x_ticks = cv.x.size() <= 12 ? cv.x : std::vector<double>{};
      po.v_lines = {cv.now};
      po.v_line_labels = {"now"};
      ui::column_begin(c, i++);
      viz::line_plot(i == 1 ? "conv-kv" : "conv-q", series, po, ImVec2(c.width, h));
      ui::column_end();
    }
    for (size_t k : {bws::kLineDkErr, bws::kLineDvErr, bws::kLineDqErr}) sentence(report_.lines[k]);
  }

  ParamValues params_;
  std::string control_error_, run_error_, computed_key_, view_forced_;
  bool valid_ = false;
  bws::Result r_;
  study::Report report_;
  viz::DataTexture p_tex_, ds_tex_, dk_tex_, q_tex_;
  viz::Heatmap p_map_, ds_map_, dk_map_, q_map_;
  TimelineView inside_{timeline::kBackward};  // issue 30: "Inside the fast kernel"
};

}  // namespace

std::unique_ptr<Panel> make_backward_panel() { return std::make_unique<BackwardPanel>(); }

}  // namespace kl::app
