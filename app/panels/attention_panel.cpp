// Rung 4 panel: scaled dot-product attention, its matrices as heatmaps, and the shared-memory wall.
//   [SECTION] Panel state and controls
//   [SECTION] Compute: the kernel writes S, P and O straight into the textures (CUDA) or host memory
//   [SECTION] Shared-memory budget: the bar, the curves, the refusal
//   [SECTION] Matrices: Q, K, V; S, P, O with hover highlighting
#include <imgui.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <random>

#include "app/panels/attention_inputs.h"
#include "app/panels/panels.h"
#include "app/ui.h"
#include "kernels/rungs/attention.h"
#include "kernels/runtime/buffer.h"
#include "kernels/runtime/errors.h"
#include "viz/data_texture.h"
#include "viz/heatmap.h"
#include "viz/plot.h"

namespace kl::app {
namespace {

std::string kib(int64_t bytes) {
  char b[48];
  std::snprintf(b, sizeof b, "%.1f KiB", double(bytes) / 1024.0);
  return b;
}

// [SECTION] Panel state and controls ------------------------------------------------------------------

class AttentionPanel : public Panel {
 public:
  AttentionPanel()
      : params_({int_param("lq", 1, 4096, 12, "Lq: number of queries"),
                 int_param("lk", 1, 4096, 20, "Lk: number of keys (walk it past the wall)"),
                 pow2_param("d", 16, 128, 32, "d: head dimension"),
                 attention::param::causal(), attention::param::scale(),
                 float_param("magnitude", 0.1, 10, 2.0, "q and k drawn uniformly from [-magnitude, magnitude]"),
                 int_param("seed", 0, 1 << 30, 1, "seed of the random inputs")}) {}

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

  void draw(AppContext& ctx) override {
    if (ImGui::CollapsingHeader("What you are looking at")) ui::explain("attention.md");
    ui::section("Inputs");
    ImGui::PushItemWidth(150);
    ui::param_row(params_, {"lq", "lk", "d", "causal"}, &control_error_, 18);
    ui::param_row(params_, {"scale", "magnitude", "seed"}, &control_error_, 18);
    ImGui::PopItemWidth();
    ui::error_box(control_error_);

    const Backend b = ctx.backend.backend;
    std::string key = backend_name(b);
    for (const ParamSpec& s : params_.specs()) key += "/" + params_.get_text(s.name);
    if (key != computed_key_) {
      computed_key_ = key;
      compute(b);
    }

    draw_budget(ctx);
    if (!run_error_.empty()) {
      ui::error_box(run_error_);
      ImGui::TextDisabled("Nothing ran: the kernel was refused before launch. Lower Lk or d, or climb to rung 5.");
      return;
    }
    if (!valid_) return;
    ui::status_line("matches reference (float64):", check_text_, check_ok_);
    ui::status_line("row sums of the weights:", rowsum_text_, rowsum_ok_);
    draw_matrices();
    fresh_ = false;
  }

 private:
  // [SECTION] Compute ----------------------------------------------------------------------------------
  void compute(Backend b) {
    valid_ = false;
    run_error_.clear();
    shape_ = {};
    shape_.lq = params_.get_int("lq");
    shape_.lk = params_.get_int("lk");
    shape_.d = int(params_.get_int("d"));
    opt_.causal = params_.get_bool("causal");
    opt_.scale = params_.get_float("scale");
    try {
      attention::check_shape(b, shape_);  // the wall, before anything is allocated
    } catch (const InputError& e) {
      run_error_ = e.what();
      return;
    }
    try {
      run(b);
      valid_ = true;
      fresh_ = true;
    } catch (const std::exception& e) {
      run_error_ = ui::error_text(e);
    }
  }

  void run(Backend b) {
    const int64_t lq = shape_.lq, lk = shape_.lk;
    const int d = shape_.d;
    in_.make(b, lq, lk, d, float(params_.get_float("magnitude")), uint32_t(params_.get_int("seed")));

    q_tex_.resize(d, int(lq), 1);
    k_tex_.resize(d, int(lk), 1);
    v_tex_.resize(d, int(lk), 1);
    q_tex_.upload(in_.hq.data());
    k_tex_.upload(in_.hk.data());
    v_tex_.upload(in_.hv.data());
    s_tex_.resize(int(lk), int(lq), 2);
    p_tex_.resize(int(lk), int(lq), 2);
    o_tex_.resize(d, int(lq), 1);

    // The kernel writes O, S and P (value + mask state) where the screen reads them: on CUDA straight
    // into the mapped GL buffers, on the CPU into host memory that is then uploaded.
    const size_t cells = size_t(lq * lk);
    if (b == Backend::Cuda) {
      viz::DataTexture::begin_device_write_all({&s_tex_, &p_tex_, &o_tex_});
      try {
        float* o = o_tex_.device_pointer();
        attention::Extras x{s_tex_.device_pointer(), p_tex_.device_pointer(), 2};
        mem::set(b, o, 0xFF, size_t(lq * d) * sizeof(float));  // poison
        attention::run(b, in_.q.data(), in_.k.data(), in_.v.data(), o, shape_, opt_, x);
        // Read back for the check only (the pictures stay on the device).
        hout_.resize(size_t(lq * d));
        hw_.resize(cells * 2);
        mem::to_host(b, hout_.data(), o, hout_.size() * sizeof(float));
        mem::to_host(b, hw_.data(), x.weights, hw_.size() * sizeof(float));
      } catch (...) {
        viz::DataTexture::end_device_write_all({&s_tex_, &p_tex_, &o_tex_});
        throw;
      }
      viz::DataTexture::end_device_write_all({&s_tex_, &p_tex_, &o_tex_});
    } else {
      hout_.assign(size_t(lq * d), std::nanf(""));
      hw_.assign(cells * 2, std::nanf(""));
      std::vector<float> hs(cells * 2, std::nanf(""));
      attention::Extras x{hs.data(), hw_.data(), 2};
      attention::run(b, in_.q.data(), in_.k.data(), in_.v.data(), hout_.data(), shape_, opt_, x);
      s_tex_.upload(hs.data());
      p_tex_.upload(hw_.data());
      o_tex_.upload(hout_.data());
    }
    check();
  }

  // Against the float64 reference; row sums of the kernel's own weights.
  void check() {
    const int64_t lq = shape_.lq, lk = shape_.lk;
    const int d = shape_.d;
    std::vector<double> ref(size_t(lq * d)), refw(size_t(lq * lk));
    attention::reference(in_.hq.data(), in_.hk.data(), in_.hv.data(), shape_, opt_, ref.data(), refw.data());
    double num = 0, den = 0, wnum = 0, wden = 0, omax = 0, pmax = 0;
    int64_t nans = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      if (std::isnan(hout_[i])) ++nans;
      num += (hout_[i] - ref[i]) * (hout_[i] - ref[i]);
      den += ref[i] * ref[i];
      omax = std::max(omax, std::fabs(ref[i]));
    }
    for (size_t c = 0; c < refw.size(); ++c) {
      const double w = hw_[c * 2];
      if (std::isnan(w)) ++nans;
      wnum += (w - refw[c]) * (w - refw[c]);
      wden += refw[c] * refw[c];
      pmax = std::max(pmax, refw[c]);
    }
    const double err = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
    const double werr = wden > 0 ? std::sqrt(wnum / wden) : std::sqrt(wnum);
    check_ok_ = nans == 0 && err < 1e-5 && werr < 1e-5;
    char buf[200];
    if (nans)
      std::snprintf(buf, sizeof buf, "no: %" PRId64 " values never written (NaN)", nans);
    else
      std::snprintf(buf, sizeof buf, "%s, relative error %.1e (output), %.1e (weights)", check_ok_ ? "yes" : "no",
                    err, werr);
    check_text_ = buf;

    // Row sums of the kernel's P; rows that see no key sum to 0.
    double worst = 0;
    int64_t empty = 0;
    for (int64_t i = 0; i < lq; ++i) {
      double s = 0;
      for (int64_t j = 0; j < lk; ++j) s += hw_[size_t(i * lk + j) * 2];
      if (attention::visible_keys(i, lq, lk, opt_.causal) == 0) {
        ++empty;
        worst = std::max(worst, std::fabs(s));
      } else {
        worst = std::max(worst, std::fabs(s - 1.0));
      }
    }
    rowsum_ok_ = worst < 1e-5;
    std::snprintf(buf, sizeof buf, "%s (max |sum - 1| = %.1e over %" PRId64 " rows)%s", rowsum_ok_ ? "1" : "not 1",
                  worst, lq - empty, empty ? "; rows that see no key are all 0 and sum to 0" : "");
    rowsum_text_ = buf;
    if (empty) {
      std::snprintf(buf, sizeof buf, "; %" PRId64 " such rows", empty);
      rowsum_text_ += buf;
    }

    // Colour scales from the data.
    double smax = 0;
    const float scale = opt_.resolved_scale(d);
    for (int64_t i = 0; i < lq; ++i)
      for (int64_t j = 0; j < attention::visible_keys(i, lq, lk, opt_.causal); ++j) {
        double a = 0;
        for (int c = 0; c < d; ++c) a += double(in_.hq[size_t(i * d + c)]) * in_.hk[size_t(j * d + c)];
        smax = std::max(smax, std::fabs(a * scale));
      }
    const float mag = float(params_.get_float("magnitude"));
    using K = viz::ColorScale::Kind;
    q_map_.set_scale({K::Diverging, -mag, mag, "q"});
    k_map_.set_scale({K::Diverging, -mag, mag, "k"});
    v_map_.set_scale({K::Diverging, -1, 1, "v"});
    s_map_.set_scale({K::Diverging, -float(std::max(smax, 1e-6)), float(std::max(smax, 1e-6)), "score"});
    p_map_.set_scale({K::Sequential, 0, float(std::max(pmax, 1e-6)), "weight"});
    o_map_.set_scale({K::Diverging, -float(std::max(omax, 1e-6)), float(std::max(omax, 1e-6)), "out"});
  }

  // [SECTION] Shared-memory budget ------------------------------------------------------------------
  void draw_budget(const AppContext& ctx) {
    ui::section("Shared memory per block: all of K and V");
    const DeviceInfo info = device_info(ctx.backend.backend);
    const int64_t limit = info.smem_per_block_optin;
    const int d = int(params_.get_int("d"));
    const int64_t lk = params_.get_int("lk");
    const int64_t need = attention::smem_bytes(lk, d), wall = attention::max_lk(d, limit);
    const float avail = ImGui::GetContentRegionAvail().x;
    const float plot_w = std::min(520.0f, avail * 0.42f);

    ImGui::BeginGroup();
    const float left_w = avail - plot_w - 16.0f;
    char text[160];
    std::snprintf(text, sizeof text, "%s needed of %s", kib(need).c_str(), kib(limit).c_str());
    viz::budget_bar("smem", double(need), double(limit), text, ImVec2(left_w, 28));
    ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + left_w);
    ImGui::Text("2 x Lk x d x 4 B (K and V) + %d x d x 4 B (the block's queries) = 2 x %" PRId64 " x %d x 4 + %d x %d x 4"
                " = %" PRId64 " bytes",
                attention::kBlockQ, lk, d, attention::kBlockQ, d, need);
    ImGui::Text("limit per block: %" PRId64 " bytes (%s)", limit,
                info.assumed ? "assumed: an H200's opt-in maximum, CPU backend" : info.name.c_str());
    ImGui::TextColored(need > limit ? ImVec4(1.0f, 0.45f, 0.4f, 1) : ImVec4(0.75f, 0.75f, 0.8f, 1),
                       "the wall at d=%d: Lk = %" PRId64 " is the largest that fits%s", d, wall,
                       need > limit ? " -- this Lk is past it" : "");
    ImGui::TextDisabled("rung 5 (flash-attention) streams K and V in tiles: its shared memory does not grow with Lk");
    ImGui::PopTextWrapPos();
    ImGui::EndGroup();

    ImGui::SameLine(0, 16);
    std::vector<viz::Series> series;
    {
      viz::Series s;
      s.label = "K+V, d=" + std::to_string(d);
      for (int64_t x = 16; x <= 4096; x *= 2) {
        s.x.push_back(double(x));
        s.y.push_back(double(attention::smem_bytes(x, d)) / 1024.0);
      }
      s.color = IM_COL32(90, 160, 230, 255);
      series.push_back(s);
    }
    viz::Series lim;
    lim.label = "limit";
    lim.x = {16, 4096};
    lim.y = {double(limit) / 1024.0, double(limit) / 1024.0};
    lim.color = IM_COL32(235, 90, 80, 255);
    series.push_back(lim);
    viz::Series here;
    here.label = "this Lk";
    here.x = {double(lk)};
    here.y = {double(need) / 1024.0};
    here.points = true;
    here.color = IM_COL32(255, 255, 255, 255);
    series.push_back(here);
    viz::PlotOptions o;
    o.title = "K+V in shared memory against Lk";
    o.x_label = "Lk";
    o.y_label = "KiB";
    o.log_x = o.log_y = true;
    o.v_lines = {double(wall)};
    o.v_line_labels = {"wall (d=" + std::to_string(d) + ")"};
    viz::line_plot("smem-vs-lk", series, o, ImVec2(plot_w, 165));
  }

  // [SECTION] Matrices ---------------------------------------------------------------------------------
  void draw_matrices() {
    const int64_t lq = shape_.lq, lk = shape_.lk;
    const int d = shape_.d;
    // Highlights follow the cell hovered last frame in S or P: its query row and key row.
    q_map_.set_highlight(hl_row_, -1);
    o_map_.set_highlight(hl_row_, -1);
    k_map_.set_highlight(hl_col_, -1);
    v_map_.set_highlight(hl_col_, -1);
    s_map_.set_highlight(hl_row_, hl_col_);
    p_map_.set_highlight(hl_row_, hl_col_);
    int hover_row = -1, hover_col = -1;

    ui::section("Q, K and V (rows: queries / keys; columns: the d features)");
    const float avail = ImGui::GetContentRegionAvail().x;
    const float gap = 14.0f;
    const float w3 = (avail - 2 * gap) / 3.0f;
    const float h1 = 120.0f;
    auto labelled = [&](const char* label, const char* id, viz::Heatmap& m, viz::DataTexture& t, float w, float h) {
      ImGui::BeginGroup();
      ImGui::TextUnformatted(label);
      viz::HeatmapHover hv = m.draw(id, t, ImVec2(w - m.colorbar_width(), h), fresh_);
      ImGui::EndGroup();
      return hv;
    };
    char l1[96], l2[96], l3[96];
    std::snprintf(l1, sizeof l1, "Q  [%" PRId64 " x %d]", lq, d);
    std::snprintf(l2, sizeof l2, "K  [%" PRId64 " x %d]", lk, d);
    std::snprintf(l3, sizeof l3, "V  [%" PRId64 " x %d]", lk, d);
    labelled(l1, "q", q_map_, q_tex_, w3, h1);
    ImGui::SameLine(0, gap);
    labelled(l2, "k", k_map_, k_tex_, w3, h1);
    ImGui::SameLine(0, gap);
    labelled(l3, "v", v_map_, v_tex_, w3, h1);

    ui::section("Scores, weights and output");
    if (opt_.causal)
      ImGui::TextDisabled("causal, bottom-right aligned: query i sees keys j <= i + (Lk - Lq) = i + %" PRId64
                          " (FlashAttention >= 2.1, PyTorch's causal_lower_right; PyTorch's is_causal=True is "
                          "top-left); hatched = masked",
                          lk - lq);
    else
      ImGui::TextDisabled("no mask: every query sees all %" PRId64 " keys", lk);
    const float h2 = std::max(140.0f, ImGui::GetContentRegionAvail().y - ImGui::GetFrameHeightWithSpacing() - 8.0f);
    const float wo = std::max(160.0f, avail * 0.22f);
    const float wsp = (avail - wo - 2 * gap) / 2.0f;
    std::snprintf(l1, sizeof l1, "S = Q K^T * %.4g  [%" PRId64 " x %" PRId64 "]", opt_.resolved_scale(d), lq, lk);
    std::snprintf(l2, sizeof l2, "P = softmax(S) by row  [%" PRId64 " x %" PRId64 "]", lq, lk);
    std::snprintf(l3, sizeof l3, "O = P V  [%" PRId64 " x %d]", lq, d);
    viz::HeatmapHover hs = labelled(l1, "s", s_map_, s_tex_, wsp, h2);
    ImGui::SameLine(0, gap);
    viz::HeatmapHover hp = labelled(l2, "p", p_map_, p_tex_, wsp, h2);
    ImGui::SameLine(0, gap);
    viz::HeatmapHover ho = labelled(l3, "o", o_map_, o_tex_, wo, h2);
    for (const viz::HeatmapHover* h : {&hs, &hp})
      if (h->active) hover_row = h->row, hover_col = h->col;
    if (ho.active) hover_row = ho.row;
    if (hover_row >= 0 && hover_col >= 0) tooltip(hover_row, hover_col);
    hl_row_ = hover_row;
    hl_col_ = hover_col;
  }

  void tooltip(int i, int j) {
    const int64_t lq = shape_.lq, lk = shape_.lk;
    const int d = shape_.d;
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
  attention::Shape shape_;
  attention::Options opt_;
  AttentionInputs in_;
  std::vector<float> hout_, hw_;
  viz::DataTexture q_tex_, k_tex_, v_tex_, s_tex_, p_tex_, o_tex_;
  viz::Heatmap q_map_, k_map_, v_map_, s_map_, p_map_, o_map_;
  std::string check_text_, rowsum_text_;
  bool check_ok_ = false, rowsum_ok_ = false, valid_ = false, fresh_ = false;
  int hl_row_ = -1, hl_col_ = -1;
};

}  // namespace

std::unique_ptr<Panel> make_attention_panel() { return std::make_unique<AttentionPanel>(); }

}  // namespace kl::app
