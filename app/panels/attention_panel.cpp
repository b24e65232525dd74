// Rung 4 panel: scaled dot-product attention, its matrices as heatmaps, and the shared-memory wall.
// What it concludes (checks, the budget, the wall, occupancy, traffic) is kernels/studies/attention_study;
// this file fills textures and draws, showing the study's sentences as they are.
//   [SECTION] Panel state and controls
//   [SECTION] Compute: the study's kernel writes S, P and O straight into the textures (CUDA) or host memory
//   [SECTION] Shared-memory budget: the bar, the curves, the refusal
//   [SECTION] Matrices: Q, K, V; S, P, O with hover highlighting
#include <imgui.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <random>

#include "app/panels/panels.h"
#include "app/panels/memory_access_view.h"
#include "app/notice.h"
#include "app/ui.h"
#include "kernels/rungs/attention.h"
#include "kernels/runtime/buffer.h"
#include "kernels/runtime/errors.h"
#include "kernels/studies/attention_study.h"
#include "viz/data_texture.h"
#include "viz/heatmap.h"
#include "viz/plot.h"

namespace kl::app {
namespace {

namespace as = attention_study;

// Text wrapped at the current wrap position: inside ui::column_begin/column_end that is the column's
// right edge (ui::wrapped would wrap at the window's).
void column_text(const std::string& text, ImU32 color = 0) {
  if (color) ImGui::PushStyleColor(ImGuiCol_Text, color);
  ImGui::TextUnformatted(text.c_str());
  if (color) ImGui::PopStyleColor();
}

// [SECTION] Panel state and controls ------------------------------------------------------------------

class AttentionPanel : public Panel {
 public:
  AttentionPanel() : params_(as::params()) {}  // the study's list: the rung's specs and the panel's own

  std::string id() const override { return "attention"; }
  std::string title() const override { return "4 · Attention"; }
  ParamValues& params() override { return params_; }
  SourceFocus source_focus() const override { return {"attention.cu", {"attention_smem"}}; }
  std::vector<TourStop> tour_stops() const override {
    const int64_t wall = attention::max_lk(32, device_info(Backend::Cpu).smem_per_block_optin);
    return {{"causal-12x20", {"causal=1"}},
            {"before-the-wall", {"lq=64", "lk=" + std::to_string(wall), "causal=0"}},
            {"at-the-wall", {"lq=64", "lk=" + std::to_string(wall + 1), "causal=0"}}};
  }
  std::vector<Animation> animations() const override {
    const int64_t wall = attention::max_lk(32, device_info(Backend::Cpu).smem_per_block_optin);
    const int64_t step = std::max<int64_t>(1, wall / 8);  // nine frames: eight below the wall, the last one key past it
    return {{"lk-to-the-wall",
             "lk=" + std::to_string(wall + 1 - 8 * step) + ".." + std::to_string(wall + 1) + ":" + std::to_string(step),
             {"lq=64", "causal=0"}, 2}};
  }

  void draw(AppContext& ctx) override {
    const Backend b = ctx.backend.backend;
    std::string key = backend_name(b);
    for (const ParamSpec& s : params_.specs()) key += "/" + params_.get_text(s.name);
    if (key != computed_key_) {
      computed_key_ = key;
      compute(b);
    }
    if (!res_.notice.empty()) notice(res_.notice);
    ImGui::PushItemWidth(110);
    ui::param_row(params_, {"lq", "lk", "d", "causal", "scale", "magnitude", "seed"}, &control_error_, 14);
    ImGui::PopItemWidth();
    ui::error_box(control_error_);

    draw_budget(ctx);
    if (!run_error_.empty()) {
      ui::error_box(run_error_);
      ui::wrapped_dim("Nothing ran: the kernel was refused before launch. Lower Lk or d, or climb to rung 5.");
      return;
    }
    if (!valid_) return;
    for (const as::Line* l : {&res_.check, &res_.rowsum, &res_.unfused}) ui::status_line(l->label.c_str(), l->text, l->ok);
    ui::wrapped_dim(res_.traffic_line);
    if (!res_.p_scale_note.empty()) ui::wrapped_dim("P's " + res_.p_scale_note);
    draw_matrices();
    // Issue 31: sectors per request of this rung's main loads and stores (app/panels/memory_access_view.h).
    draw_memory_access(b, "attention", params_);
    if (ImGui::CollapsingHeader("What you are looking at")) ui::explain("attention.md");
    fresh_ = false;
  }

 private:
  // [SECTION] Compute ----------------------------------------------------------------------------------
  void compute(Backend b) {
    valid_ = false;
    run_error_.clear();
    try {
      res_ = {};
      res_.budget = as::budget(b, params_.get_int("lk"), int(params_.get_int("d")));
      run(b);
      if (!res_.ran) {
        run_error_ = res_.run_error;
        return;
      }
      set_scales();
      valid_ = true;
      fresh_ = true;
    } catch (const std::exception& e) {
      run_error_ = ui::error_text(e);
    }
  }

  // The study runs the kernel; on CUDA it writes O, S and P (value + mask state) straight into the
  // mapped GL buffers, on the CPU into host memory that is then uploaded.
  void run(Backend b) {
    const int64_t lq = params_.get_int("lq"), lk = params_.get_int("lk");
    const int d = int(params_.get_int("d"));
    if (as::budget(b, lk, d).past) {  // refused before anything is allocated
      res_ = as::run(b, params_);
      return;
    }
    s_tex_.resize(int(lk), int(lq), 2);
    p_tex_.resize(int(lk), int(lq), 2);
    o_tex_.resize(d, int(lq), 1);
    if (b == Backend::Cuda) {
      viz::DataTexture::begin_device_write_all({&s_tex_, &p_tex_, &o_tex_});
      try {
        res_ = as::run(b, params_, {s_tex_.device_pointer(), p_tex_.device_pointer(), o_tex_.device_pointer()});
      } catch (...) {
        viz::DataTexture::end_device_write_all({&s_tex_, &p_tex_, &o_tex_});
        throw;
      }
      viz::DataTexture::end_device_write_all({&s_tex_, &p_tex_, &o_tex_});
    } else {
      res_ = as::run(b, params_);
      s_tex_.upload(res_.hs.data());
      p_tex_.upload(res_.hw.data());
      o_tex_.upload(res_.hout.data());
    }
    q_tex_.resize(d, int(lq), 1);
    k_tex_.resize(d, int(lk), 1);
    v_tex_.resize(d, int(lk), 1);
    q_tex_.upload(res_.in.hq.data());
    k_tex_.upload(res_.in.hk.data());
    v_tex_.upload(res_.in.hv.data());
  }

  // Colour scales from the study's data.
  void set_scales() {
    const float mag = res_.magnitude;
    const float smax = float(std::max(res_.smax, 1e-6)), omax = float(std::max(res_.omax, 1e-6));
    using K = viz::ColorScale::Kind;
    q_map_.set_scale({K::Diverging, -mag, mag, "q"});
    k_map_.set_scale({K::Diverging, -mag, mag, "k"});
    v_map_.set_scale({K::Diverging, -1, 1, "v"});
    s_map_.set_scale({K::Diverging, -smax, smax, "score"});
    p_map_.set_scale({K::Sequential, 0, float(std::max(res_.p_scale, 1e-6)), res_.p_scale_label});
    o_map_.set_scale({K::Diverging, -omax, omax, "out"});
    o_map_.set_nan_means_unwritten(true);  // the output is poisoned with NaN before the launch
  }

  // [SECTION] Shared-memory budget ------------------------------------------------------------------
  // The bar and its sentences beside the curve where the panel is wide enough, above it where not.
  void draw_budget(const AppContext&) {
    ui::section("Shared memory per block: all of K and V, and the block's query rows");
    const as::Budget& g = res_.budget;
    const ui::ColumnsLayout cols = ui::columns_or_stack(2, 380.0f);
    ui::column_begin(cols, 0);
    viz::budget_bar("smem", double(g.need), double(g.limit), g.bar_text.c_str(), ImVec2(cols.width, ui::px(28)));
    column_text(g.formula_line);
    column_text(g.limit_line);
    column_text(g.wall_line, g.past ? IM_COL32(255, 115, 102, 255) : IM_COL32(191, 191, 204, 255));
    column_text(g.occupancy_line);
    column_text("rung 5 (flash-attention) streams K and V in tiles: its shared memory does not grow with Lk",
                ImGui::GetColorU32(ImGuiCol_TextDisabled));
    ui::column_end();
    // Beside the sentences the curve is as tall as they are; stacked under them, a fixed height.
    const float text_h = ImGui::GetItemRectSize().y;
    ui::column_begin(cols, 1);
    budget_plot(g, ImVec2(cols.width, cols.per_row == 2 ? std::max(ui::px(165), text_h) : ui::px(200)));
    ui::column_end();
  }

  void budget_plot(const as::Budget& g, const ImVec2& size) {
    std::vector<viz::Series> series;
    viz::Series need;
    need.label = g.legend;
    for (int64_t x = 16; x <= 4096; x *= 2) {
      need.x.push_back(double(x));
      need.y.push_back(double(attention::smem_bytes(x, g.d)) / 1024.0);
    }
    need.color = IM_COL32(90, 160, 230, 255);
    series.push_back(need);
    viz::Series lim;
    lim.label = "limit";
    lim.x = {16, 4096};
    lim.y = {double(g.limit) / 1024.0, double(g.limit) / 1024.0};
    lim.color = IM_COL32(235, 90, 80, 255);
    series.push_back(lim);
    viz::Series here;
    here.label = "this Lk";
    here.x = {double(g.lk)};
    here.y = {double(g.need) / 1024.0};
    here.points = true;
    here.color = IM_COL32(255, 255, 255, 255);
    series.push_back(here);
    viz::PlotOptions o;
    o.title = "shared memory per block against Lk";
    o.x_label = "Lk";
    o.y_label = "KiB";
    o.log_x = o.log_y = true;
    o.v_lines = {double(g.wall)};
    o.v_line_labels = {"wall (d=" + std::to_string(g.d) + ")"};
    viz::line_plot("smem-vs-lk", series, o, size);
  }

  // [SECTION] Matrices ---------------------------------------------------------------------------------
  // One labelled heatmap in column i of `c`, `h` high; the label wraps inside the column.
  viz::HeatmapHover labelled(const ui::ColumnsLayout& c, int i, const char* label, const char* id, viz::Heatmap& m,
                             viz::DataTexture& t, float h) {
    ui::column_begin(c, i);
    column_text(label);
    viz::HeatmapHover hv = m.draw(id, t, ImVec2(std::max(ui::px(40), c.width - m.colorbar_width()), h), fresh_);
    ui::column_end();
    return hv;
  }

  void draw_matrices() {
    const int64_t lq = res_.shape.lq, lk = res_.shape.lk;
    const int d = res_.shape.d;
    const attention::Options& opt = res_.opt;
    // Highlights follow the cell hovered last frame in S or P: its query row and key row.
    q_map_.set_highlight(hl_row_, -1);
    o_map_.set_highlight(hl_row_, -1);
    k_map_.set_highlight(hl_col_, -1);
    v_map_.set_highlight(hl_col_, -1);
    s_map_.set_highlight(hl_row_, hl_col_);
    p_map_.set_highlight(hl_row_, hl_col_);

    ui::section("Q, K and V (rows: queries / keys; columns: the d features)");
    const ui::ColumnsLayout qkv = ui::columns_or_stack(3, 260.0f);
    char l1[96], l2[160], l3[96];
    std::snprintf(l1, sizeof l1, "Q  [%" PRId64 " x %d]", lq, d);
    std::snprintf(l2, sizeof l2, "K  [%" PRId64 " x %d]", lk, d);
    std::snprintf(l3, sizeof l3, "V  [%" PRId64 " x %d]", lk, d);
    labelled(qkv, 0, l1, "q", q_map_, q_tex_, ui::px(90));
    labelled(qkv, 1, l2, "k", k_map_, k_tex_, ui::px(90));
    labelled(qkv, 2, l3, "v", v_map_, v_tex_, ui::px(90));

    ui::section("Scores, weights and output");
    char mask[400];
    if (opt.causal)
      std::snprintf(mask, sizeof mask,
                    "causal, bottom-right aligned: query i sees keys j <= i + (Lk - Lq) = i + %" PRId64
                    " (FlashAttention >= 2.1, PyTorch's causal_lower_right; PyTorch's is_causal=True is "
                    "top-left); hatched = masked",
                    lk - lq);
    else
      std::snprintf(mask, sizeof mask, "no mask: every query sees all %" PRId64 " keys", lk);
    const ui::ColumnsLayout spo = ui::columns_or_stack(3, 260.0f);
    // Side by side they take the rest of the panel's height above their caption (the mask); stacked,
    // each a fixed height.
    const ImGuiStyle& st = ImGui::GetStyle();
    const float caption_h = ImGui::CalcTextSize(mask, nullptr, false, ImGui::GetContentRegionAvail().x).y;
    const float h2 = spo.per_row == 3 ? std::max(ui::px(140), ImGui::GetContentRegionAvail().y - caption_h -
                                                                  ImGui::GetTextLineHeight() - 3 * st.ItemSpacing.y -
                                                                  ui::px(4))
                                      : ui::px(240);
    std::snprintf(l1, sizeof l1, "S = Q K^T * %.4g  [%" PRId64 " x %" PRId64 "]", opt.resolved_scale(d), lq, lk);
    std::snprintf(l2, sizeof l2, "P = softmax(S) by row  [%" PRId64 " x %" PRId64 "]%s", lq, lk,
                  res_.p_scale_note.empty() ? "" : " (colour top: 99th percentile)");
    std::snprintf(l3, sizeof l3, "O = P V  [%" PRId64 " x %d]", lq, d);
    const viz::HeatmapHover hs = labelled(spo, 0, l1, "s", s_map_, s_tex_, h2);
    const viz::HeatmapHover hp = labelled(spo, 1, l2, "p", p_map_, p_tex_, h2);
    const viz::HeatmapHover ho = labelled(spo, 2, l3, "o", o_map_, o_tex_, h2);
    ui::wrapped_dim(mask);
    int hover_row = -1, hover_col = -1;
    for (const viz::HeatmapHover* h : {&hs, &hp})
      if (h->active) hover_row = h->row, hover_col = h->col;
    if (ho.active) hover_row = ho.row;
    if (hover_row >= 0 && hover_col >= 0) tooltip(hover_row, hover_col);
    hl_row_ = hover_row;
    hl_col_ = hover_col;
  }

  void tooltip(int i, int j) {
    const int64_t lq = res_.shape.lq, lk = res_.shape.lk;
    const int d = res_.shape.d;
    const attention::Options& opt_ = res_.opt;
    const as::Inputs& in_ = res_.in;
    const std::vector<float>& hw_ = res_.hw;
    if (i >= lq || j >= lk) return;
    const bool vis = j < attention::visible_keys(i, lq, lk, opt_.causal);
    double s = 0;
    for (int c = 0; c < d; ++c) s += double(in_.hq[size_t(i * d + c)]) * in_.hk[size_t(j * d + c)];
    s *= opt_.resolved_scale(d);
    ImGui::BeginTooltip();
    ImGui::Text("query %d, key %d", i, j);
    if (vis) {
      ImGui::Text("score  S[%d,%d] = q_%d . k_%d * scale = %.5g", i, j, i, j, s);
      ImGui::Text("weight P[%d,%d] = %.6g  (as the kernel wrote it)", i, j, hw_[size_t(i * lk + j) * 2]);
    } else {
      ImGui::Text("masked: key %d > %d + (Lk - Lq) = %" PRId64 ", weight 0", j, i, i + lk - lq);
    }
    ImGui::TextDisabled("highlighted: query row %d in Q and O, key row %d in K and V", i, j);
    ImGui::EndTooltip();
  }

  ParamValues params_;
  std::string control_error_, run_error_, computed_key_;
  as::Result res_;
  viz::DataTexture q_tex_, k_tex_, v_tex_, s_tex_, p_tex_, o_tex_;
  viz::Heatmap q_map_, k_map_, v_map_, s_map_, p_map_, o_map_;
  bool valid_ = false, fresh_ = false;
  int hl_row_ = -1, hl_col_ = -1;
};

}  // namespace

std::unique_ptr<Panel> make_attention_panel() { return std::make_unique<AttentionPanel>(); }

}  // namespace kl::app
