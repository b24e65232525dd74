// Rung 5 panel: FlashAttention's tiled online softmax, step by step, drawn from the kernel's own trace.
// What it concludes (the per-step state, checks, memory and traffic) is kernels/studies/
// flash_attention_study; this file fills textures and draws, showing the study's sentences as they are.
//   [SECTION] Panel state and controls
//   [SECTION] Compute: one traced run per shape; the step only recomposes the weights from the trace
//   [SECTION] Stepper
//   [SECTION] Tile grid: done / current / pending / skipped
//   [SECTION] The chosen query block: m, l, alpha, partial against final weights, the output converging
//   [SECTION] Memory: rung 4 against rung 5
#include <imgui.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

#include "app/panels/panels.h"
#include "app/ui.h"
#include "kernels/rungs/attention.h"
#include "kernels/rungs/flash_attention.h"
#include "kernels/rungs/flash_attention_fast.h"
#include "kernels/runtime/buffer.h"
#include "kernels/runtime/errors.h"
#include "kernels/studies/flash_attention_study.h"
#include "viz/data_texture.h"
#include "viz/heatmap.h"
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

// [SECTION] Panel state and controls ------------------------------------------------------------------

class FlashAttentionPanel : public Panel {
 public:
  FlashAttentionPanel()
      : params_({int_param("lq", 1, 512, 48, "Lq: number of queries"),
                 int_param("lk", 1, 16384, 96, "Lk: number of keys (no wall: try past rung 4's)"),
                 pow2_param("d", 16, 128, 32, "d: head dimension"),
                 fa::param::causal(),
                 panel_override(fa::param::block_m(), "16", "opens on Lq=48 x Lk=96 as a 3 x 6 grid of tiles to step"),
                 panel_override(fa::param::block_n(), "16", "opens on Lq=48 x Lk=96 as a 3 x 6 grid of tiles to step"),
                 int_param("qblock", 0, 511, 1, "the query block whose rows are shown in detail"),
                 int_param("step", 1, 16384, 3, "K/V tiles folded in so far (the scrubber)"),
                 float_param("magnitude", 0.1, 10, 2.0, "q and k drawn uniformly from [-magnitude, magnitude]"),
                 int_param("seed", 0, 1 << 30, 1, "seed of the random inputs")}) {}

  std::string id() const override { return "flash-attention"; }
  std::string title() const override { return "5 · FlashAttention"; }
  ParamValues& params() override { return params_; }
  SourceFocus source_focus() const override {
    return {"flash_attention.cu", {"flash_teaching"}};
  }
  std::vector<TourStop> tour_stops() const override {
    return {{"step1", {"step=1"}}, {"step3", {"step=3"}}, {"last-step", {"step=6"}},
            {"causal-step4", {"causal=1", "step=4"}}, {"past-the-wall", {"lk=4096", "lq=32", "block_n=64", "step=40"}}};
  }
  std::vector<Animation> animations() const override {
    return {{"stepper", "step=1..6", {}, 2}, {"stepper-causal", "step=1..6", {"causal=1"}, 2}};
  }

  void draw(AppContext& ctx) override {
    if (ImGui::CollapsingHeader("What you are looking at")) ui::explain("flash_attention.md");
    ui::section("Inputs and tiles");
    ImGui::PushItemWidth(130);
    ui::param_row(params_, {"lq", "lk", "d", "causal", "block_m", "block_n"}, &control_error_, 16);
    ui::param_row(params_, {"qblock", "magnitude", "seed"}, &control_error_, 16);
    ImGui::PopItemWidth();
    ui::error_box(control_error_);

    const Backend b = ctx.backend.backend;
    std::string key = backend_name(b);
    for (const ParamSpec& s : params_.specs())
      if (s.name != "step" && s.name != "qblock") key += "/" + params_.get_text(s.name);
    key += "/" + params_.get_text("qblock");
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
    const int64_t step = params_.get_int("step");
    if (step != composed_step_) compose(b, step);
    for (const attention_study::Line* l : {&res_.check, &res_.rung4}) ui::status_line(l->label.c_str(), l->text, l->ok);
    if (!adjust_note_.empty()) ImGui::TextDisabled("%s", adjust_note_.c_str());

    const float avail = ImGui::GetContentRegionAvail().x;
    const float left_w = std::floor(avail * 0.40f), gap = 18.0f, right_w = avail - left_w - gap;
    ImGui::BeginGroup();
    draw_tile_grid(left_w);
    draw_memory(left_w, b);
    ImGui::EndGroup();
    ImGui::SameLine(0, gap);
    ImGui::BeginGroup();
    draw_block(right_w, step);
    ImGui::EndGroup();
    fresh_ = false;
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
    ui::section("Steps: one K/V tile folded in per step");
    int64_t step = params_.get_int("step");
    auto set_step = [&](int64_t s) {
      s = std::clamp<int64_t>(s, 1, steps_);
      if (s != step) params_.set("step", std::to_string(s)), step = s;
    };
    if (ImGui::Button("|<")) set_step(1), playing_ = false;
    ImGui::SameLine();
    if (ImGui::Button("<")) set_step(step - 1), playing_ = false;
    ImGui::SameLine();
    if (ImGui::Button(playing_ ? "Pause" : "Play", ImVec2(64, 0))) {
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
    ImGui::SetNextItemWidth(std::min(420.0f, ImGui::GetContentRegionAvail().x * 0.4f));
    if (ImGui::SliderInt("##scrub", &s, 1, int(steps_), "", ImGuiSliderFlags_AlwaysClamp)) set_step(s), playing_ = false;
    if (playing_ && ImGui::GetTime() - last_tick_ > 0.6) {
      last_tick_ = ImGui::GetTime();
      if (step >= steps_) playing_ = false;
      else set_step(step + 1);
    }
    ImGui::SameLine(0, 14);
    ImGui::TextUnformatted(fs::step_view(res_, step).stepper_text.c_str());
  }

  // [SECTION] Tile grid ------------------------------------------------------------------------------------
  void draw_tile_grid(float width) {
    ui::section("Tiles: query blocks x K/V tiles");
    const int64_t step = params_.get_int("step");
    const float font = ImGui::GetFontSize();
    const float label_w = font * 2.2f;
    const float gw = width - label_w;
    const float cw = gw / float(steps_);
    const float ch = std::clamp(130.0f / float(q_blocks_), 6.0f, 26.0f);
    ImGui::Dummy(ImVec2(width, 1));
    const ImVec2 o = ImGui::GetCursorScreenPos();
    const ImVec2 g0(o.x + label_w, o.y);
    const float gh = ch * float(q_blocks_);
    ImGui::InvisibleButton("tilegrid", ImVec2(width, gh + font * 1.6f));
    const bool hovered = ImGui::IsItemHovered();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    for (int64_t qb = 0; qb < q_blocks_; ++qb) {
      const float y0 = g0.y + ch * float(qb), y1 = y0 + ch;
      // A row's states are runs: done [0, step-1), current, pending [step, run), skipped [run, steps).
      int64_t run_end = 0;
      while (run_end < steps_ && res_.hstate[size_t(qb * steps_ + run_end)] == fa::kTileComputed) ++run_end;
      auto span = [&](int64_t a, int64_t b, ImU32 c) {
        if (b > a) dl->AddRectFilled(ImVec2(g0.x + cw * float(a), y0), ImVec2(g0.x + cw * float(b), y1), c);
      };
      const int64_t cur = step - 1;
      span(0, std::min(cur, run_end), kDone);
      if (cur < run_end) span(cur, cur + 1, kCurrent);
      span(std::min(cur + 1, run_end), run_end, kPending);
      span(run_end, steps_, kSkipped);
      if (run_end < steps_) {  // hatch the skipped run
        dl->PushClipRect(ImVec2(g0.x + cw * float(run_end), y0), ImVec2(g0.x + gw, y1), true);
        for (float x = g0.x + cw * float(run_end) - ch; x < g0.x + gw; x += 6.0f)
          dl->AddLine(ImVec2(x, y1), ImVec2(x + ch, y0), IM_COL32(90, 92, 100, 255));
        dl->PopClipRect();
      }
      char lbl[16];
      std::snprintf(lbl, sizeof lbl, "%" PRId64, qb);
      if (ch >= font * 0.8f || qb % 4 == 0)
        dl->AddText(ImVec2(o.x, y0 + (ch - font) * 0.5f), ImGui::GetColorU32(ImGuiCol_TextDisabled), lbl);
    }
    // Tile boundaries when they are wide enough to see, and the chosen block outlined.
    if (cw >= 4.0f)
      for (int64_t t = 1; t < steps_; ++t)
        dl->AddLine(ImVec2(g0.x + cw * float(t), g0.y), ImVec2(g0.x + cw * float(t), g0.y + gh), IM_COL32(20, 21, 24, 255));
    if (ch >= 4.0f)
      for (int64_t qb = 1; qb < q_blocks_; ++qb)
        dl->AddLine(ImVec2(g0.x, g0.y + ch * float(qb)), ImVec2(g0.x + gw, g0.y + ch * float(qb)), IM_COL32(20, 21, 24, 255));
    dl->AddRect(ImVec2(g0.x - 1, g0.y + ch * float(qblock_) - 1), ImVec2(g0.x + gw + 1, g0.y + ch * float(qblock_ + 1) + 1),
                IM_COL32(255, 255, 255, 255), 0, 0, 2.0f);
    dl->AddText(ImVec2(g0.x, g0.y + gh + 3), ImGui::GetColorU32(ImGuiCol_TextDisabled),
                "K/V tile (step) ->     rows: query blocks (white: the one shown on the right)");
    if (hovered) {
      const ImVec2 m = ImGui::GetIO().MousePos;
      const int64_t t = int64_t((m.x - g0.x) / cw), qb = int64_t((m.y - g0.y) / ch);
      if (t >= 0 && t < steps_ && qb >= 0 && qb < q_blocks_) {
        const uint8_t st = res_.hstate[size_t(qb * steps_ + t)];
        ImGui::SetTooltip("query block %" PRId64 " (rows %" PRId64 "..%" PRId64 "), K/V tile %" PRId64
                          " = step %" PRId64 " (keys %" PRId64 "..%" PRId64 ")\n%s",
                          qb, qb * bm_, std::min((qb + 1) * bm_, res_.shape.lq) - 1, t + 1, t + 1, t * bn_,
                          std::min((t + 1) * bn_, res_.shape.lk) - 1,
                          st == fa::kTileSkipped ? "skipped: no row of this block sees any of these keys (causal)"
                          : t < step - 1         ? "done"
                          : t == step - 1        ? "current: being folded in at this step"
                                                 : "pending");
      }
    }
    // Legend.
    auto swatch = [&](ImU32 c, const char* text) {
      const ImVec2 p = ImGui::GetCursorScreenPos();
      dl->AddRectFilled(ImVec2(p.x, p.y + 3), ImVec2(p.x + font, p.y + font + 1), c);
      ImGui::Dummy(ImVec2(font + 4, font));
      ImGui::SameLine();
      ImGui::TextUnformatted(text);
      ImGui::SameLine(0, 14);
    };
    swatch(kDone, "done");
    swatch(kCurrent, "current");
    swatch(kPending, "pending");
    swatch(IM_COL32(90, 92, 100, 255), "skipped (causal)");
    ImGui::NewLine();
  }

  // [SECTION] The chosen query block -------------------------------------------------------------------
  void draw_block(float width, int64_t step) {
    const fs::StepView v = fs::step_view(res_, step);
    const int rows = v.rows;
    const int64_t row0 = v.row0;
    ui::section(v.title.c_str());
    std::vector<viz::Bar> mb, lb, ab;
    for (int r = 0; r < rows; ++r) {
      const bool mv = v.moved[size_t(r)];
      const std::string lbl;  // rows run left to right (see the caption); numbers do not fit 128 slots
      const float m = v.m[size_t(r)];
      mb.push_back({lbl, std::isfinite(m) ? double(m) : 0.0, mv ? kMoved : kSteady});
      lb.push_back({lbl, double(v.l[size_t(r)]), mv ? kMoved : kSteady});
      ab.push_back({lbl, double(v.alpha[size_t(r)]), mv ? kMoved : kSteady});
    }
    ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + width);
    ImGui::TextDisabled("%s", v.caption.c_str());
    ImGui::PopTextWrapPos();
    const float gap = 12.0f, w3 = (width - 2 * gap) / 3.0f, bh = 110.0f;
    viz::PlotOptions om, ol, oa;
    om.title = "m: running max per row";
    ol.title = "l: running sum per row";
    oa.title = "alpha applied at this step";
    oa.y_min = 0;
    oa.y_max = 1.05;
    viz::bar_chart("m-bars", mb, om, ImVec2(w3, bh));
    ImGui::SameLine(0, gap);
    viz::bar_chart("l-bars", lb, ol, ImVec2(w3, bh));
    ImGui::SameLine(0, gap);
    viz::bar_chart("alpha-bars", ab, oa, ImVec2(w3, bh));

    // Partial against final weights (same colour scale), composed from the trace.
    const float cb = partial_map_.colorbar_width();
    const float hw = width - cb - 4.0f;
    const float hh = std::clamp(float(rows) * 6.0f, 48.0f, 96.0f);
    ImGui::TextUnformatted("weights so far: each earlier tile's P rescaled by every alpha since, over the running l");
    partial_map_.set_grid(bn_, 0);
    final_map_.set_grid(bn_, 0);
    viz::HeatmapHover hp = partial_map_.draw("partial", partial_tex_, ImVec2(hw, hh), fresh_ || step_fresh_);
    ImGui::TextUnformatted("final weights (after the last step): the softmax of rung 4");
    viz::HeatmapHover hf = final_map_.draw("final", final_tex_, ImVec2(hw, hh), fresh_);
    for (const viz::HeatmapHover* h : {&hp, &hf})
      if (h->active && h->row < rows)
        ImGui::SetTooltip("query %" PRId64 ", key %d (K/V tile %d)", row0 + h->row, h->col, h->col / bn_ + 1);

    // The output converging, and O_t / l_t itself.
    const float ow = std::min(260.0f, width * 0.3f);
    viz::Series s;
    s.label = "|O_t/l_t - O| / |O|";
    for (int64_t t = 0; t < steps_; ++t) {
      s.x.push_back(double(t + 1));
      s.y.push_back(std::max(res_.converge[size_t(t)], 1e-9));
    }
    viz::PlotOptions oc;
    oc.title = "the chosen block's output converging";
    oc.x_label = "step";
    oc.log_y = true;
    oc.v_lines = {double(step)};
    oc.v_line_labels = {"now"};
    const float ph = std::max(110.0f, ImGui::GetContentRegionAvail().y - 8.0f);
    viz::line_plot("converge", {s}, oc, ImVec2(width - ow - gap, ph));
    ImGui::SameLine(0, gap);
    ImGui::BeginGroup();
    ImGui::TextUnformatted("O_t / l_t  [rows x d]");
    o_map_.draw("o-partial", o_tex_, ImVec2(ow - o_map_.colorbar_width(), ph - ImGui::GetFontSize() - 6),
                fresh_ || step_fresh_);
    ImGui::EndGroup();
    step_fresh_ = false;
  }

  // [SECTION] Memory: rung 4 against rung 5 -----------------------------------------------------------
  void draw_memory(float width, Backend backend) {
    ui::section("Memory: standard attention, rung 4 and rung 5");
    const int d = res_.shape.d;
    const int64_t lim = std::max<int64_t>(res_.limit, 1);
    const int64_t wall = res_.wall;
    const ImU32 c_std = IM_COL32(200, 120, 220, 255), c4 = IM_COL32(235, 110, 90, 255), c5 = IM_COL32(90, 200, 140, 255);
    viz::Series r4, r5, sl;
    r4.label = "rung 4: K+V+Q rows";
    r5.label = "rung 5: a tile";
    sl.label = "limit";
    r4.color = c4;
    r5.color = c5;
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
    const float gap = 10.0f, half = std::floor((width - gap) * 0.5f);
    viz::line_plot("mem-onchip", {r4, r5, sl}, o, ImVec2(half, 150));
    ImGui::SameLine(0, gap);

    // Bytes through device memory (counted by the study), over Lk and at this shape, all in KiB.
    const fs::Traffic& t = res_.mem;
    viz::Series ts, t4, t5;
    // No legend (it would cover this small plot): the colours are the bars'.
    ts.color = c_std;
    t4.color = c4;
    t5.color = c5;
    for (size_t i = 0; i < t.lk.size(); ++i) {
      ts.x.push_back(t.lk[i]), ts.y.push_back(t.unfused_kib[i]);
      t5.x.push_back(t.lk[i]), t5.y.push_back(t.flash_kib[i]);
      if (std::isfinite(t.smem_kib[i])) t4.x.push_back(t.lk[i]), t4.y.push_back(t.smem_kib[i]);  // up to the wall
    }
    viz::PlotOptions ot;
    ot.title = "traffic (KiB), colours as the bars";
    ot.x_label = "Lk";
    ot.log_x = ot.log_y = true;
    ot.v_lines = {double(wall), double(res_.shape.lk)};
    ot.v_line_labels = {"wall", "Lk"};
    viz::line_plot("mem-traffic-lk", {ts, t4, t5}, ot, ImVec2(width - half - gap, 150));

    const float bars_w = std::floor(width * 0.47f);
    std::vector<viz::Bar> bars = {{"standard", t.unfused / 1024.0, c_std},
                                  {"rung 4", t.smem / 1024.0, c4},
                                  {"rung 5", t.flash / 1024.0, c5}};
    viz::PlotOptions ob;
    ob.title = t.smem_refused ? "traffic here (KiB; rung 4 refused)" : "traffic here (KiB)";
    viz::bar_chart("mem-traffic", bars, ob, ImVec2(bars_w, 125));
    ImGui::SameLine(0, gap);
    ImGui::BeginGroup();
    ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + width - bars_w - gap);
    ImGui::TextDisabled("%s", t.caption.c_str());
    ImGui::PopTextWrapPos();
    ImGui::EndGroup();
    ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + width);
    ImGui::TextDisabled("%s", t.paper_line.c_str());
    ImGui::PopTextWrapPos();

    // The same algorithm at full speed (`--variant fast`): its compile-time tile shapes.
    if (d == 64 || d == 128) {
      auto line = [&](fa::FastPath path, const char* where) {
        const fa::FastTileShape t = fa::fast_tile_shape(d, path);
        ImGui::TextDisabled("fast, %s (%s): %d x %d tiles, %d warps, %d stages, %s",
                            fa::fast_path_name(path), where, t.block_m, t.block_n, t.warps, t.stages,
                            mem::bytes_text(uint64_t(t.smem_bytes)).c_str());
      };
      if (backend == Backend::Cuda) {
        try {
          line(fa::fast_path(), "this device");
        } catch (const std::exception& e) {
          ImGui::TextDisabled("fast variant: %s", e.what());
        }
      } else {
        line(fa::FastPath::Wgmma, "H100/H200");
        line(fa::FastPath::MmaSync, "other GPUs");
      }
    }
  }

  ParamValues params_;
  std::string control_error_, run_error_, computed_key_, adjust_note_;
  fs::Result res_;
  int bm_ = 16, bn_ = 16;
  int64_t q_blocks_ = 0, steps_ = 0, qblock_ = 0, composed_step_ = -1;
  viz::DataTexture partial_tex_, final_tex_, o_tex_;
  viz::Heatmap partial_map_, final_map_, o_map_;
  bool valid_ = false, fresh_ = false, step_fresh_ = false, playing_ = false;
  double last_tick_ = 0;
};

}  // namespace

std::unique_ptr<Panel> make_flash_attention_panel() { return std::make_unique<FlashAttentionPanel>(); }

}  // namespace kl::app
