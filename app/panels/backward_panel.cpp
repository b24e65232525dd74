// Rung 6 panel: the backward pass, drawn from the backward study (kernels/studies/
// flash_attention_backward_study.h), which runs the teaching kernel with its trace. This file only fills
// textures and draws.
//   [SECTION] Panel state and controls
//   [SECTION] Textures from the study's result
//   [SECTION] Stepper: the query tiles of the chosen program
//   [SECTION] Saved state and the wall
//   [SECTION] Tile order: K/V tiles outer, query tiles inner
//   [SECTION] The current tile: recomputed P, the forward's P, dS; dK with its lineage; convergence
#include <imgui.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>

#include "app/panels/panels.h"
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

// [SECTION] Panel state and controls ------------------------------------------------------------------

class BackwardPanel : public Panel {
 public:
  BackwardPanel() : params_(bws::params()) {}
  std::string id() const override { return "backward"; }
  std::string title() const override { return "6 · Backward"; }
  ParamValues& params() override { return params_; }
  SourceFocus source_focus() const override { return {"flash_attention_backward.cu", {"backward_teaching"}}; }
  std::vector<TourStop> tour_stops() const override {
    return {{"step2", {}}, {"step0", {"q_tile=0"}}, {"non-causal", {"causal=0", "kv_tile=2", "q_tile=1"}}};
  }

  void draw(AppContext& ctx) override {
    if (ImGui::CollapsingHeader("What you are looking at")) ui::explain("backward.md");
    ui::section("Inputs and tiles");
    ImGui::PushItemWidth(120);
    ui::param_row(params_, {"lq", "lk", "d", "causal", "block_m", "block_n"}, &control_error_, 16);
    ui::param_row(params_, {"kv_tile", "seed"}, &control_error_, 16);
    ImGui::PopItemWidth();
    ui::error_box(control_error_);
    const Backend b = ctx.backend.backend;
    const std::string key = ui::settings_key(
        params_, {"lq", "lk", "d", "causal", "block_m", "block_n", "kv_tile", "q_tile", "seed"}, b);
    if (key != computed_key_) {
      computed_key_ = key;
      compute(b);
    }
    if (!run_error_.empty()) {
      ui::error_box(run_error_);
      return;
    }
    if (!valid_) return;
    draw_stepper();
    for (const study::Check& c : report_.checks) ui::status_line("", c.sentence, c.pass);
    const float avail = ImGui::GetContentRegionAvail().x;
    const float left_w = std::floor(avail * 0.36f), gap = 18.0f, right_w = avail - left_w - gap;
    ImGui::BeginGroup();
    draw_saved_state(left_w);
    draw_tile_grid(left_w);
    ImGui::EndGroup();
    ImGui::SameLine(0, gap);
    ImGui::BeginGroup();
    draw_tiles(right_w);
    ImGui::EndGroup();
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
    fill_tile(pf_tex_, r_.p_forward.data());
    fill_tile(ds_tex_, ds);
    const float pmax = std::max(abs_max(p, tile), abs_max(r_.p_forward.data(), tile));
    p_map_.set_scale({K::Sequential, 0, pmax, "P"});
    pf_map_.set_scale({K::Sequential, 0, pmax, "P"});
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
  }

  // [SECTION] Stepper ------------------------------------------------------------------------------------
  void draw_stepper() {
    ui::section("Steps: program j (K/V tile) walks its query tiles i");
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
    ImGui::SetNextItemWidth(std::min(420.0f, ImGui::GetContentRegionAvail().x * 0.4f));
    if (ImGui::SliderInt("##qtile", &s, 0, int(steps - 1), fmt, ImGuiSliderFlags_AlwaysClamp)) set_step(s);
    ImGui::SameLine(0, 20);
    const uint8_t st = r_.tile_state[size_t(r_.kv_tile * r_.q_blocks + step)];
    ImGui::TextDisabled("rows %" PRId64 "..%" PRId64 " x keys %" PRId64 "..%" PRId64 "%s", step * r_.block_m,
                        std::min((step + 1) * r_.block_m, r_.s.lq) - 1, r_.kv_tile * r_.block_n,
                        std::min((r_.kv_tile + 1) * r_.block_n, r_.s.lk) - 1,
                        st == fab::kTileSkipped ? ": skipped (no row sees these keys)" : "");
  }

  // [SECTION] Saved state and the wall ----------------------------------------------------------------------
  void draw_saved_state(float width) {
    ui::section("Saved for the backward: P (naive) against L (FlashAttention)");
    viz::PlotOptions po;
    po.log_y = true;
    po.y_label = "bytes";
    viz::bar_chart("saved", {{"L", double(r_.lse_bytes), kDone}, {"P", double(r_.p_bytes), kCurrent},
                             {"P + dP", double(r_.naive_bytes), IM_COL32(200, 80, 70, 255)}},
                   po, ImVec2(width, 150));
    const std::string text = "P and dP " + mem::bytes_text(r_.naive_bytes) + " of " +
                             mem::bytes_text(r_.wall.available) +
                             (r_.backend == Backend::Cuda ? " free" : " available");
    viz::budget_bar("wall", double(r_.naive_bytes), double(std::max<uint64_t>(r_.wall.available, 1)), text,
                    ImVec2(width, 22));
    ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + width);
    ImGui::TextWrapped("The naive backward hits the wall at Lq = Lk = %" PRId64
                       " here; the teaching one keeps %s of L at this shape and recomputes P.",
                       r_.wall_length, mem::bytes_text(r_.lse_bytes).c_str());
    ImGui::PopTextWrapPos();
  }

  // [SECTION] Tile order -------------------------------------------------------------------------------------
  ImU32 tile_colour(int64_t kb, int64_t qb) const {
    const uint8_t st = r_.tile_state[size_t(kb * r_.q_blocks + qb)];
    if (st == fab::kTileSkipped) return kSkipped;
    if (kb != r_.kv_tile) return kOther;
    return qb < r_.q_tile ? kDone : qb == r_.q_tile ? kCurrent : kPending;
  }

  void draw_tile_grid(float width) {
    ui::section("Tile order: one program per K/V tile (columns), query tiles inner (rows)");
    const float font = ImGui::GetFontSize();
    const float cw = width / float(r_.k_blocks);
    const float ch = std::clamp(180.0f / float(r_.q_blocks), 6.0f, 28.0f);
    const ImVec2 g0 = ImGui::GetCursorScreenPos();
    const float gh = ch * float(r_.q_blocks);
    ImGui::InvisibleButton("tilegrid", ImVec2(width, gh));
    const bool hovered = ImGui::IsItemHovered();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    for (int64_t kb = 0; kb < r_.k_blocks; ++kb)
      for (int64_t qb = 0; qb < r_.q_blocks; ++qb) {
        const ImVec2 a(g0.x + cw * float(kb), g0.y + ch * float(qb)), z(a.x + cw, a.y + ch);
        dl->AddRectFilled(a, z, tile_colour(kb, qb));
        if (r_.tile_state[size_t(kb * r_.q_blocks + qb)] == fab::kTileSkipped) {  // hatched
          dl->PushClipRect(a, z, true);
          for (float x = a.x - ch; x < z.x; x += 6.0f) dl->AddLine(ImVec2(x, z.y), ImVec2(x + ch, a.y), kHatch);
          dl->PopClipRect();
        }
        if (cw >= 4.0f && ch >= 4.0f) dl->AddRect(a, z, IM_COL32(20, 21, 24, 255));
      }
    dl->AddRect(ImVec2(g0.x + cw * float(r_.kv_tile) - 1, g0.y - 1),
                ImVec2(g0.x + cw * float(r_.kv_tile + 1) + 1, g0.y + gh + 1), IM_COL32(255, 255, 255, 255), 0, 0, 2.0f);
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
    auto swatch = [&](ImU32 c, const char* text, bool hatched = false) {
      const ImVec2 p = ImGui::GetCursorScreenPos();
      dl->AddRectFilled(ImVec2(p.x, p.y + 3), ImVec2(p.x + font, p.y + font + 1), c);
      if (hatched) {
        dl->PushClipRect(ImVec2(p.x, p.y + 3), ImVec2(p.x + font, p.y + font + 1), true);
        for (float x = p.x - font; x < p.x + font; x += 5.0f)
          dl->AddLine(ImVec2(x, p.y + font + 1), ImVec2(x + font, p.y + 3), kHatch);
        dl->PopClipRect();
      }
      ImGui::Dummy(ImVec2(font + 4, font));
      ImGui::SameLine();
      ImGui::TextUnformatted(text);
      ImGui::SameLine(0, 12);
    };
    swatch(kDone, "done");
    swatch(kCurrent, "current");
    swatch(kPending, "pending");
    swatch(kOther, "other programs");
    swatch(kSkipped, "skipped (causal)", true);
    ImGui::NewLine();
  }

  // [SECTION] The current tile --------------------------------------------------------------------------------
  void draw_tiles(float width) {
    ui::section("The current tile: P recomputed from L, the forward's P, and dS = P (dP - D)");
    const float cb = p_map_.colorbar_width() + 8.0f;
    const float side = std::max(60.0f, std::min(240.0f, (width - 3 * (cb + 28.0f) - 24.0f) / 3.0f));
    const float h = side * float(r_.block_m) / float(r_.block_n);
    ImGui::BeginGroup();
    ImGui::TextUnformatted("recomputed P = exp(S - L)");
    p_map_.draw("p", p_tex_, ImVec2(side, h));
    ImGui::EndGroup();
    ImGui::SameLine(0, 12);
    ImGui::BeginGroup();
    ImGui::TextUnformatted("forward P (rung 5, final)");
    pf_map_.draw("pf", pf_tex_, ImVec2(side, h));
    ImGui::EndGroup();
    ImGui::SameLine(0, 12);
    ImGui::BeginGroup();
    ImGui::Text("dS signs: %" PRId64 " +, %" PRId64 " -, %" PRId64 " zero", r_.ds_positive, r_.ds_negative, r_.ds_zero);
    ds_map_.draw("ds", ds_tex_, ImVec2(side, h));
    ImGui::EndGroup();

    ui::section("dK_j after this step (hover: where a cell comes from), and the errors as tiles fold in");
    const float dk_w = std::min(260.0f, width * 0.32f), dk_h = dk_w * float(r_.block_n) / float(r_.d);
    ImGui::BeginGroup();
    const viz::HeatmapHover hv = dk_map_.draw("dk", dk_tex_, ImVec2(dk_w, std::min(dk_h, 200.0f)));
    if (hv.active) {
      ImGui::SetTooltip("dK[key %" PRId64 ", %d] = scale * sum over query rows i of dS[i, key] * Q[i, %d]\n"
                        "dS column %d of every query tile (highlighted in dS for this one) and column %d of Q",
                        r_.kv_tile * r_.block_n + hv.row, hv.col, hv.col, hv.row, hv.col);
      ds_map_.set_highlight(-1, hv.row);
      p_map_.set_highlight(-1, hv.row);
    } else {
      ds_map_.set_highlight(-1, -1);
      p_map_.set_highlight(-1, -1);
    }
    ImGui::EndGroup();
    ImGui::SameLine(0, 16);
    draw_convergence(width - dk_w - dk_map_.colorbar_width() - 110.0f);
  }

  void draw_convergence(float width) {
    auto series = [](const std::string& label, const std::vector<double>& err, unsigned colour) {
      viz::Series s;
      s.label = label;
      s.color = colour;
      for (size_t i = 0; i < err.size(); ++i) {
        s.x.push_back(double(i));
        s.y.push_back(std::max(err[i], 1e-9));
      }
      return s;
    };
    viz::PlotOptions po;
    po.log_y = true;
    po.x_label = "query tiles folded in (dK, dV) / programs folded in (dQ)";
    po.y_label = "relative error vs float64";
    po.v_lines = {double(r_.q_tile)};
    po.v_line_labels = {"this step"};
    viz::line_plot("conv", {series("dK_j", r_.dk_err, kCurrent), series("dV_j", r_.dv_err, kDone),
                            series("dQ_i", r_.dq_err, IM_COL32(120, 200, 120, 255))},
                   po, ImVec2(std::max(width, 200.0f), 240));
  }

  ParamValues params_;
  std::string control_error_, run_error_, computed_key_;
  bool valid_ = false;
  bws::Result r_;
  study::Report report_;
  viz::DataTexture p_tex_, pf_tex_, ds_tex_, dk_tex_;
  viz::Heatmap p_map_, pf_map_, ds_map_, dk_map_;
};

}  // namespace

std::unique_ptr<Panel> make_backward_panel() { return std::make_unique<BackwardPanel>(); }

}  // namespace kl::app
