// Heatmap: a DataTexture coloured by shaders/heatmap.frag into an RGBA8 texture at the size it is shown,
// drawn with ImGui::Image, with its colour bar, grid lines, highlight bands, hover and wheel zoom.
//   [SECTION] Colour maps      viridis (polynomial fit), blue-white-red, a 12-colour qualitative palette
//   [SECTION] GL helpers       shader program, state save/restore around the colouring pass
//   [SECTION] Heatmap          colorize() and draw()
//   [SECTION] Colour bar
#include "viz/heatmap.h"

#include "viz/layout_audit.h"
#include "viz/ui_log.h"

#include <epoxy/gl.h>
#include <imgui.h>
#include <imgui_internal.h>  // SetItemUsingMouseWheel

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "assets/embedded.h"
#include "kernels/runtime/errors.h"
#include "viz/draw_util.h"
#include "viz/gl_check.h"
#include "viz/host_common.h"

namespace kl::viz {

// [SECTION] Colour maps ------------------------------------------------------------------------------
void colormap_rgb(float t, float rgb[3]) {
  // Viridis as a degree-6 polynomial per channel, fitted to the matplotlib table (max error ~0.01).
  static const float c[7][3] = {
      {0.27772733f, 0.00540734f, 0.33409981f},   {0.10509304f, 1.40461353f, 1.38459016f},
      {-0.33086183f, 0.21484756f, 0.09509516f},  {-4.63423050f, -5.79910097f, -19.33244096f},
      {6.22826994f, 14.17993337f, 56.69055260f}, {4.77638500f, -13.74514538f, -65.35303263f},
      {-5.43545586f, 4.64585261f, 26.31243525f}};
  t = std::isnan(t) ? 0.0f : std::clamp(t, 0.0f, 1.0f);
  for (int k = 0; k < 3; ++k) {
    float v = c[6][k];
    for (int i = 5; i >= 0; --i) v = v * t + c[i][k];
    rgb[k] = std::clamp(v, 0.0f, 1.0f);
  }
}

void diverging_rgb(float t, float rgb[3]) {
  // Dark blue -> white -> dark red, symmetric in lightness around the midpoint (ColorBrewer RdBu stops).
  static const float stops[11][3] = {
      {0.020f, 0.188f, 0.380f}, {0.129f, 0.400f, 0.675f}, {0.263f, 0.576f, 0.765f},
      {0.573f, 0.773f, 0.871f}, {0.820f, 0.898f, 0.941f}, {0.969f, 0.969f, 0.969f},
      {0.992f, 0.859f, 0.780f}, {0.957f, 0.647f, 0.510f}, {0.839f, 0.376f, 0.302f},
      {0.698f, 0.094f, 0.169f}, {0.404f, 0.000f, 0.122f}};
  t = std::isnan(t) ? 0.5f : std::clamp(t, 0.0f, 1.0f);
  const float x = t * 10.0f;
  const int i = std::min(9, int(x));
  const float f = x - float(i);
  for (int k = 0; k < 3; ++k) rgb[k] = stops[i][k] + (stops[i + 1][k] - stops[i][k]) * f;
}

void categorical_rgb(int index, float rgb[3]) {
  // Twelve qualitative colours, neighbours far apart in hue; no grey (masked) and no pure red (unwritten).
  static const unsigned char p[12][3] = {
      {78, 121, 167},  {242, 142, 43},  {89, 161, 79},   {225, 87, 89},
      {118, 183, 178}, {237, 201, 72},  {176, 122, 161}, {255, 157, 167},
      {156, 117, 95},  {160, 203, 232}, {140, 209, 125}, {211, 114, 149}};
  const int i = ((index % 12) + 12) % 12;
  for (int k = 0; k < 3; ++k) rgb[k] = p[i][k] / 255.0f;
}

namespace {

ImU32 rgb_u32(const float c[3], float alpha = 1.0f) {
  return ImGui::ColorConvertFloat4ToU32(ImVec4(c[0], c[1], c[2], alpha));
}

// [SECTION] GL helpers --------------------------------------------------------------------------------
// The shader's own text with `prelude` (generated #defines) put right after its #version line.
GLuint compile(GLenum type, const char* asset, const std::string& prelude = "") {
  std::string_view src = assets::find(asset);
  if (src.empty()) throw RuntimeError(std::string("embedded shader missing: ") + asset);
  src.remove_suffix(1);  // the terminating zero find() appends
  const size_t eol = src.find('\n');
  const size_t split = src.rfind("#version", 0) == 0 && eol != std::string_view::npos ? eol + 1 : 0;
  GLuint s = glCreateShader(type);
  const char* texts[3] = {src.data(), prelude.c_str(), src.data() + split};
  const GLint lens[3] = {GLint(split), GLint(prelude.size()), GLint(src.size() - split)};
  glShaderSource(s, 3, texts, lens);
  glCompileShader(s);
  GLint ok = 0;
  glGetShaderiv(s, GL_COMPILE_STATUS, &ok);
  if (!ok) {
    char log[2048] = {0};
    glGetShaderInfoLog(s, sizeof(log), nullptr, log);
    glDeleteShader(s);
    throw RuntimeError(std::string("shader ") + asset + " does not compile: " + log);
  }
  return s;
}

// Everything the colouring pass changes, put back afterwards: it runs in the middle of building the
// UI, and neither the caller's GL code nor another pass should see a difference.
struct SavedGlState {
  GLint fbo = 0, program = 0, vao = 0, active = 0, tex0 = 0, tex1 = 0, viewport[4] = {0, 0, 0, 0};
  GLboolean blend = GL_FALSE, scissor = GL_FALSE, depth = GL_FALSE, cull = GL_FALSE;
  SavedGlState() {
    glGetIntegerv(GL_DRAW_FRAMEBUFFER_BINDING, &fbo);
    glGetIntegerv(GL_CURRENT_PROGRAM, &program);
    glGetIntegerv(GL_VERTEX_ARRAY_BINDING, &vao);
    glGetIntegerv(GL_ACTIVE_TEXTURE, &active);
    glActiveTexture(GL_TEXTURE0);
    glGetIntegerv(GL_TEXTURE_BINDING_2D, &tex0);
    glActiveTexture(GL_TEXTURE1);
    glGetIntegerv(GL_TEXTURE_BINDING_2D, &tex1);
    glGetIntegerv(GL_VIEWPORT, viewport);
    blend = glIsEnabled(GL_BLEND);
    scissor = glIsEnabled(GL_SCISSOR_TEST);
    depth = glIsEnabled(GL_DEPTH_TEST);
    cull = glIsEnabled(GL_CULL_FACE);
  }
  ~SavedGlState() {
    glBindFramebuffer(GL_DRAW_FRAMEBUFFER, GLuint(fbo));
    glUseProgram(GLuint(program));
    glBindVertexArray(GLuint(vao));
    glActiveTexture(GL_TEXTURE1);
    glBindTexture(GL_TEXTURE_2D, GLuint(tex1));
    glActiveTexture(GL_TEXTURE0);
    glBindTexture(GL_TEXTURE_2D, GLuint(tex0));
    glActiveTexture(GLenum(active));
    glViewport(viewport[0], viewport[1], viewport[2], viewport[3]);
    auto set = [](GLenum cap, GLboolean on) { on ? glEnable(cap) : glDisable(cap); };
    set(GL_BLEND, blend);
    set(GL_SCISSOR_TEST, scissor);
    set(GL_DEPTH_TEST, depth);
    set(GL_CULL_FACE, cull);
  }
};

constexpr float kMinSpanCells = 2.0f;  // the deepest zoom shows this many cells across
constexpr int kMaxOutput = 8192;        // the coloured texture's largest side in pixels

}  // namespace

// [SECTION] Heatmap -----------------------------------------------------------------------------------
struct Heatmap::State {
  // GL objects owned by this heatmap (small; sharing them would tie them to one context, and hosts
  // come and go in tests).
  uint64_t generation = 0;  // the render host's context the names below belong to
  GLuint program = 0, vao = 0, lut = 0;
  GLint u_data = -1, u_lut = -1, u_kind = -1, u_channels = -1, u_range = -1, u_view = -1,
        u_out_size = -1, u_grid = -1, u_palette = -1;
  // The visible part of the data in cells; x1 <= x0 means "all of it".
  float x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  int view_w = -1, view_h = -1;  // the data shape the view above belongs to
  // What the RGBA texture holds now.
  struct Key {
    unsigned tex = 0;
    int w = 0, h = 0, c = 0, out_w = 0, out_h = 0, kind = 0, grid_c = 0, grid_r = 0;
    float lo = 0, hi = 0, x0 = 0, y0 = 0, x1 = 0, y1 = 0;
    bool operator==(const Key& o) const {
      return tex == o.tex && w == o.w && h == o.h && c == o.c && out_w == o.out_w && out_h == o.out_h &&
             kind == o.kind && grid_c == o.grid_c && grid_r == o.grid_r && lo == o.lo && hi == o.hi &&
             x0 == o.x0 && y0 == o.y0 && x1 == o.x1 && y1 == o.y1;
    }
  } last;
  bool valid = false;

  void init_gl() {
    if (program) return;
    GLuint vs = compile(GL_VERTEX_SHADER, "shaders/heatmap.vert");
    GLuint fs = 0;
    try {
      fs = compile(GL_FRAGMENT_SHADER, "shaders/heatmap.frag", cell_state_glsl_defines());
    } catch (...) {
      glDeleteShader(vs);
      throw;
    }
    program = glCreateProgram();
    glAttachShader(program, vs);
    glAttachShader(program, fs);
    glLinkProgram(program);
    glDeleteShader(vs);
    glDeleteShader(fs);
    GLint ok = 0;
    glGetProgramiv(program, GL_LINK_STATUS, &ok);
    if (!ok) {
      char log[2048] = {0};
      glGetProgramInfoLog(program, sizeof(log), nullptr, log);
      glDeleteProgram(program);
      program = 0;
      throw RuntimeError(std::string("heatmap shader program does not link: ") + log);
    }
    u_data = glGetUniformLocation(program, "u_data");
    u_lut = glGetUniformLocation(program, "u_lut");
    u_kind = glGetUniformLocation(program, "u_kind");
    u_channels = glGetUniformLocation(program, "u_channels");
    u_range = glGetUniformLocation(program, "u_range");
    u_view = glGetUniformLocation(program, "u_view");
    u_out_size = glGetUniformLocation(program, "u_out_size");
    u_grid = glGetUniformLocation(program, "u_grid");
    u_palette = glGetUniformLocation(program, "u_palette");
    glGenVertexArrays(1, &vao);

    // The colour-map look-up table: row 0 viridis, row 1 diverging, linear filtering between entries.
    unsigned char lut_px[2][256][4];
    for (int i = 0; i < 256; ++i) {
      float a[3], b[3];
      colormap_rgb(i / 255.0f, a);
      diverging_rgb(i / 255.0f, b);
      for (int k = 0; k < 3; ++k) {
        lut_px[0][i][k] = (unsigned char)std::lround(a[k] * 255.0f);
        lut_px[1][i][k] = (unsigned char)std::lround(b[k] * 255.0f);
      }
      lut_px[0][i][3] = lut_px[1][i][3] = 255;
    }
    glGenTextures(1, &lut);
    glBindTexture(GL_TEXTURE_2D, lut);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_LINEAR);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_LINEAR);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
    glBindBuffer(GL_PIXEL_UNPACK_BUFFER, 0);
    glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
    glPixelStorei(GL_UNPACK_ROW_LENGTH, 0);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, 256, 2, 0, GL_RGBA, GL_UNSIGNED_BYTE, lut_px);
    if (!gl_check("Heatmap: shader program and colour map"))
      throw RuntimeError("GL error creating the heatmap's program: " + gl_first_error());
  }
};

Heatmap::Heatmap() : st_(std::make_unique<State>()) {}

Heatmap::~Heatmap() {
  // Names of a context that is gone (the host was destroyed first) are dropped, not deleted.
  if (st_->generation == 0 || st_->generation != detail::gl_context_generation()) return;
  if (st_->program) glDeleteProgram(st_->program);
  if (st_->vao) glDeleteVertexArrays(1, &st_->vao);
  if (st_->lut) glDeleteTextures(1, &st_->lut);
  if (fbo_) glDeleteFramebuffers(1, &fbo_);
  if (rgba_) glDeleteTextures(1, &rgba_);
}

void Heatmap::reset_view() { st_->x0 = st_->y0 = st_->x1 = st_->y1 = 0; }

float Heatmap::colorbar_width() const {
  return scale_.kind == ColorScale::Kind::Categorical || !colorbar_ ? 0.0f : colorbar_width_for(scale_);
}

float colorbar_width_for(const ColorScale& s) {
  // The bar, its tick labels (the widest any tick count gives) and the rotated caption, all inside.
  const float font = ImGui::GetFontSize();
  float lo = s.lo, hi = s.hi;
  if (!(hi > lo)) hi = lo + 1.0f;
  float max_label = 0;
  for (int target = 2; target <= 12; target += 2)
    for (double v : detail::nice_ticks(lo, hi, target, false))
      max_label = std::max(max_label, ImGui::CalcTextSize(detail::tick_label(v).c_str()).x);
  const float caption = s.label.empty() ? 0.0f : font + 6;
  return std::ceil(font * 0.6f + font * 0.9f + 6 + max_label + 4 + caption + 2);
}

void Heatmap::colorize(DataTexture& data, int out_w, int out_h) {
  State& st = *st_;
  if (st.generation != detail::gl_context_generation()) {
    // First use, or a new render host: names from an earlier context mean nothing here.
    st.program = st.vao = st.lut = 0;
    rgba_ = fbo_ = 0;
    rgba_w_ = rgba_h_ = 0;
    st.valid = false;
    st.generation = detail::gl_context_generation();
  }
  st.init_gl();
  SavedGlState saved;
  if (!rgba_ || rgba_w_ != out_w || rgba_h_ != out_h) {
    if (!rgba_) glGenTextures(1, &rgba_);
    glActiveTexture(GL_TEXTURE0);
    glBindTexture(GL_TEXTURE_2D, rgba_);
    // Nearest: the texture is made at the size it is shown, so cell edges and patterns stay crisp.
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, out_w, out_h, 0, GL_RGBA, GL_UNSIGNED_BYTE, nullptr);
    if (!fbo_) glGenFramebuffers(1, &fbo_);
    glBindFramebuffer(GL_DRAW_FRAMEBUFFER, fbo_);
    glFramebufferTexture2D(GL_DRAW_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_TEXTURE_2D, rgba_, 0);
    const GLenum status = glCheckFramebufferStatus(GL_DRAW_FRAMEBUFFER);
    if (status != GL_FRAMEBUFFER_COMPLETE)
      throw RuntimeError("heatmap framebuffer incomplete (status " + std::to_string(status) + ")");
    rgba_w_ = out_w;
    rgba_h_ = out_h;
  }
  glBindFramebuffer(GL_DRAW_FRAMEBUFFER, fbo_);
  glViewport(0, 0, out_w, out_h);
  glDisable(GL_BLEND);
  glDisable(GL_SCISSOR_TEST);
  glDisable(GL_DEPTH_TEST);
  glDisable(GL_CULL_FACE);
  glUseProgram(st.program);
  glBindVertexArray(st.vao);
  glActiveTexture(GL_TEXTURE0);
  glBindTexture(GL_TEXTURE_2D, data.gl_id());
  glActiveTexture(GL_TEXTURE1);
  glBindTexture(GL_TEXTURE_2D, st.lut);
  glUniform1i(st.u_data, 0);
  glUniform1i(st.u_lut, 1);
  const int kind = scale_.kind == ColorScale::Kind::Sequential ? 0
                   : scale_.kind == ColorScale::Kind::Diverging ? 1 : 2;
  glUniform1i(st.u_kind, kind);
  glUniform1i(st.u_channels, data.channels());
  glUniform2f(st.u_range, scale_.lo, scale_.hi);
  glUniform4f(st.u_view, st.x0, st.y0, st.x1, st.y1);
  glUniform2f(st.u_out_size, float(out_w), float(out_h));
  glUniform2i(st.u_grid, std::max(0, grid_cols_), std::max(0, grid_rows_));
  float palette[12][3];
  for (int i = 0; i < 12; ++i) categorical_rgb(i, palette[i]);
  glUniform3fv(st.u_palette, 12, &palette[0][0]);
  glDrawArrays(GL_TRIANGLES, 0, 3);
  if (!gl_check("Heatmap::colorize")) throw RuntimeError("GL error colouring a heatmap: " + gl_first_error());
}

HeatmapHover Heatmap::draw(const char* id, DataTexture& data, const ImVec2& size, bool dirty) {
  HeatmapHover hover;
  State& st = *st_;
  ImGui::PushID(id);
  const ImVec2 pos = ImGui::GetCursorScreenPos();
  const ImVec2 sz(std::max(1.0f, std::floor(size.x)), std::max(1.0f, std::floor(size.y)));
  if (data.gl_id() == 0 || data.width() < 1 || data.height() < 1) {
    ImGui::Dummy(sz);
    ImGui::GetWindowDrawList()->AddRect(pos, ImVec2(pos.x + sz.x, pos.y + sz.y),
                                        ImGui::GetColorU32(ImGuiCol_Border));
    ImGui::PopID();
    return hover;
  }
  const float W = float(data.width()), H = float(data.height());
  // New data of another shape: the whole of it (a view of the old shape would read as a zoom).
  if (data.width() != st.view_w || data.height() != st.view_h) {
    st.view_w = data.width(), st.view_h = data.height();
    st.x0 = st.y0 = st.x1 = st.y1 = 0;
  }
  if (st.x1 <= st.x0 || st.y1 <= st.y0 || st.x1 > W || st.y1 > H) st.x0 = 0, st.y0 = 0, st.x1 = W, st.y1 = H;

  // The image, then its interaction (the wheel belongs to the image, not the window, while hovered).
  ImGui::InvisibleButton("##heatmap", sz, ImGuiButtonFlags_MouseButtonLeft |
                                              ImGuiButtonFlags_MouseButtonRight |
                                              ImGuiButtonFlags_MouseButtonMiddle);
  const bool hovered = ImGui::IsItemHovered();
  const ImGuiIO& io = ImGui::GetIO();
  const float spx = (st.x1 - st.x0) / sz.x, spy = (st.y1 - st.y0) / sz.y;  // cells per pixel
  if (hovered) {
    ImGui::SetItemUsingMouseWheel();
    const float mx = st.x0 + (io.MousePos.x - pos.x) * spx, my = st.y0 + (io.MousePos.y - pos.y) * spy;
    if (io.MouseWheel != 0.0f) {
      const float f = std::pow(0.8f, io.MouseWheel);
      const float nw = std::clamp((st.x1 - st.x0) * f, std::min(W, kMinSpanCells), W);
      const float nh = std::clamp((st.y1 - st.y0) * f, std::min(H, kMinSpanCells), H);
      const float ax = (mx - st.x0) / (st.x1 - st.x0), ay = (my - st.y0) / (st.y1 - st.y0);
      st.x0 = std::clamp(mx - ax * nw, 0.0f, W - nw), st.x1 = st.x0 + nw;
      st.y0 = std::clamp(my - ay * nh, 0.0f, H - nh), st.y1 = st.y0 + nh;
    }
    if (ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) reset_view();
  }
  if (ImGui::IsItemActive() && (ImGui::IsMouseDragging(ImGuiMouseButton_Right) ||
                                ImGui::IsMouseDragging(ImGuiMouseButton_Middle))) {
    const float nw = st.x1 - st.x0, nh = st.y1 - st.y0;
    st.x0 = std::clamp(st.x0 - io.MouseDelta.x * spx, 0.0f, W - nw), st.x1 = st.x0 + nw;
    st.y0 = std::clamp(st.y0 - io.MouseDelta.y * spy, 0.0f, H - nh), st.y1 = st.y0 + nh;
  }
  if (st.x1 <= st.x0 || st.y1 <= st.y0) st.x0 = 0, st.y0 = 0, st.x1 = W, st.y1 = H;

  // Colour at framebuffer resolution, only when something changed.
  const ImVec2 fb_scale = io.DisplayFramebufferScale;
  const int out_w = std::clamp(int(std::lround(sz.x * std::max(1.0f, fb_scale.x))), 1, kMaxOutput);
  const int out_h = std::clamp(int(std::lround(sz.y * std::max(1.0f, fb_scale.y))), 1, kMaxOutput);
  State::Key key{data.gl_id(), data.width(), data.height(), data.channels(), out_w, out_h,
                 int(scale_.kind), grid_cols_, grid_rows_, scale_.lo, scale_.hi,
                 st.x0, st.y0, st.x1, st.y1};
  if (dirty || !st.valid || !(key == st.last) || st.generation != detail::gl_context_generation()) {
    colorize(data, out_w, out_h);
    st.last = key;
    st.valid = true;
  }

  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 end(pos.x + sz.x, pos.y + sz.y);
  dl->AddImage(reinterpret_cast<ImTextureID>(static_cast<intptr_t>(rgba_)), pos, end);
  dl->PushClipRect(pos, end, true);
  const float cw = 1.0f / spx, ch = 1.0f / spy;  // pixels per cell
  auto sx = [&](float cx) { return pos.x + (cx - st.x0) * cw; };
  auto sy = [&](float cy) { return pos.y + (cy - st.y0) * ch; };
  // Highlight bands: a translucent fill with a bright outline on a dark halo (visible on light and dark
  // colours alike), at least 3 pixels thick.
  const ImU32 band_fill = IM_COL32(255, 255, 255, 40), band_line = IM_COL32(255, 255, 255, 230),
              band_halo = IM_COL32(0, 0, 0, 170);
  if (hl_row_ >= 0 && hl_row_ < data.height()) {
    float a = sy(float(hl_row_)), b = sy(float(hl_row_ + 1));
    if (b - a < 3) a = (a + b) * 0.5f - 1.5f, b = a + 3;
    dl->AddRectFilled(ImVec2(pos.x, a), ImVec2(end.x, b), band_fill);
    dl->AddRect(ImVec2(pos.x - 1, a - 1), ImVec2(end.x + 1, b + 1), band_halo, 0, 0, 3.0f);
    dl->AddRect(ImVec2(pos.x - 1, a - 1), ImVec2(end.x + 1, b + 1), band_line, 0, 0, 1.5f);
  }
  if (hl_col_ >= 0 && hl_col_ < data.width()) {
    float a = sx(float(hl_col_)), b = sx(float(hl_col_ + 1));
    if (b - a < 3) a = (a + b) * 0.5f - 1.5f, b = a + 3;
    dl->AddRectFilled(ImVec2(a, pos.y), ImVec2(b, end.y), band_fill);
    dl->AddRect(ImVec2(a - 1, pos.y - 1), ImVec2(b + 1, end.y + 1), band_halo, 0, 0, 3.0f);
    dl->AddRect(ImVec2(a - 1, pos.y - 1), ImVec2(b + 1, end.y + 1), band_line, 0, 0, 1.5f);
  }
  if (hovered) {
    const int col = std::clamp(int(std::floor(st.x0 + (io.MousePos.x - pos.x) * spx)), 0, data.width() - 1);
    const int row = std::clamp(int(std::floor(st.y0 + (io.MousePos.y - pos.y) * spy)), 0, data.height() - 1);
    hover.active = true;
    hover.col = col;
    hover.row = row;
    if (ui_log::is_open()) {
      static std::string last;  // one line per cell entered, not per frame
      const std::string line = std::string("hover heatmap ") + id + " col " + std::to_string(col) + " row " + std::to_string(row);
      if (line != last) ui_log::event(line), last = line;
    }
    if (cw >= 4 && ch >= 4) {
      dl->AddRect(ImVec2(sx(float(col)) - 1, sy(float(row)) - 1), ImVec2(sx(float(col + 1)) + 1, sy(float(row + 1)) + 1),
                  IM_COL32(0, 0, 0, 200), 0, 0, 3.0f);
      dl->AddRect(ImVec2(sx(float(col)), sy(float(row))), ImVec2(sx(float(col + 1)), sy(float(row + 1))),
                  IM_COL32(255, 255, 255, 255), 0, 0, 1.5f);
    }
  }
  dl->PopClipRect();
  dl->AddRect(ImVec2(pos.x - 1, pos.y - 1), ImVec2(end.x + 1, end.y + 1), IM_COL32(90, 94, 102, 255));
  const bool zoomed = st.x0 > 0 || st.y0 > 0 || st.x1 < W || st.y1 < H;
  if (zoomed) {
    char buf[64];
    snprintf(buf, sizeof(buf), "zoom %.0f%%  (double-click: reset)", 100.0f * W / (st.x1 - st.x0));
    const ImVec2 ts = ImGui::CalcTextSize(buf);
    dl->AddRectFilled(ImVec2(end.x - ts.x - 10, pos.y + 2), ImVec2(end.x - 2, pos.y + ts.y + 6), IM_COL32(0, 0, 0, 170), 3);
    dl->AddText(ImVec2(end.x - ts.x - 6, pos.y + 4), IM_COL32(230, 230, 230, 255), buf);
  }

  audit::widget(std::string("heatmap '") + id + "'", pos, end);
  ui_log::place("heatmap", id, pos.x, pos.y, end.x, end.y);
  if (scale_.kind != ColorScale::Kind::Categorical && colorbar_) {
    ImGui::SameLine(0, 0);
    colorbar(scale_, ImVec2(colorbar_width(), sz.y));
  }
  ImGui::PopID();
  return hover;
}

// [SECTION] Colour bar --------------------------------------------------------------------------------
void colorbar(const ColorScale& s, const ImVec2& size) {
  const ImVec2 pos = ImGui::GetCursorScreenPos();
  ImGui::Dummy(size);
  if (s.kind == ColorScale::Kind::Categorical || size.y < 8) return;
  const ImVec2 end(pos.x + size.x, pos.y + size.y);
  const std::string name = "colour bar '" + s.label + "'";
  audit::widget(name, pos, end);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->PushClipRect(pos, end, true);  // the bar, its ticks and its caption never leave the widget
  const float font = ImGui::GetFontSize();
  const float pad_y = std::floor(font * 0.5f);   // room for the end labels
  const float bar_x0 = pos.x + std::floor(font * 0.6f), bar_w = std::floor(font * 0.9f);
  const float y0 = pos.y + pad_y, y1 = pos.y + size.y - pad_y;
  if (y1 - y0 < 4) return;
  const bool div = s.kind == ColorScale::Kind::Diverging;
  const int n = 64;
  for (int i = 0; i < n; ++i) {
    // Top of the bar is `hi`.
    float ta[3], tb[3];
    const float t_top = 1.0f - float(i) / n, t_bot = 1.0f - float(i + 1) / n;
    (div ? diverging_rgb : colormap_rgb)(t_top, ta);
    (div ? diverging_rgb : colormap_rgb)(t_bot, tb);
    const float ya = y0 + (y1 - y0) * i / n, yb = y0 + (y1 - y0) * (i + 1) / n;
    dl->AddRectFilledMultiColor(ImVec2(bar_x0, ya), ImVec2(bar_x0 + bar_w, yb + (i + 1 < n ? 0.5f : 0.0f)),
                                rgb_u32(ta), rgb_u32(ta), rgb_u32(tb), rgb_u32(tb));
  }
  const ImU32 frame = IM_COL32(110, 114, 122, 255), text = ImGui::GetColorU32(ImGuiCol_Text);
  dl->AddRect(ImVec2(bar_x0 - 1, y0 - 1), ImVec2(bar_x0 + bar_w + 1, y1 + 1), frame);

  float lo = s.lo, hi = s.hi;
  if (!(hi > lo)) hi = lo + 1.0f;
  const int target = std::clamp(int((y1 - y0) / (font * 2.2f)), 2, 12);  // as colorbar_width_for() assumes
  std::vector<double> ticks = detail::nice_ticks(lo, hi, target, false);
  float max_label = 0, last_top = 1e9f, last_bottom = -1e9f;
  for (double v : ticks) {
    const float y = std::round(y1 - float((v - lo) / (hi - lo)) * (y1 - y0));
    dl->AddLine(ImVec2(bar_x0 + bar_w, y), ImVec2(bar_x0 + bar_w + 4, y), frame, 1.0f);
    const std::string lbl = detail::tick_label(v);
    const ImVec2 ts = ImGui::CalcTextSize(lbl.c_str());
    max_label = std::max(max_label, ts.x);
    const float ly = std::clamp(y - ts.y * 0.5f, pos.y, pos.y + size.y - ts.y);
    if (ly + ts.y > last_top - 1 && ly < last_bottom + 1) continue;  // labels never overlap
    detail::add_label(dl, name, pos, end, ImVec2(bar_x0 + bar_w + 6, ly), text, lbl);
    last_top = std::min(last_top, ly), last_bottom = std::max(last_bottom, ly + ts.y);
  }
  if (!s.label.empty()) {
    // Right of the tick labels, or against the widget's right edge when the labels are wide.
    const float x = std::min(bar_x0 + bar_w + 10 + max_label + font * 0.5f, end.x - font * 0.5f - 1);
    const ImVec2 c(x, (y0 + y1) * 0.5f);
    detail::add_text_vertical(dl, c, ImGui::GetColorU32(ImGuiCol_TextDisabled), s.label.c_str());
    const ImRect r = detail::vertical_text_rect(c, s.label.c_str());
    audit::label(name, s.label, r.Min, r.Max, pos, end);
  }
  dl->PopClipRect();
}

}  // namespace kl::viz
