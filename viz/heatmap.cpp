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
#include <map>
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
  GLint fbo = 0, read_fbo = 0, program = 0, vao = 0, active = 0, tex0 = 0, tex1 = 0, viewport[4] = {0, 0, 0, 0};
  GLboolean blend = GL_FALSE, scissor = GL_FALSE, depth = GL_FALSE, cull = GL_FALSE;
  SavedGlState() {
    glGetIntegerv(GL_DRAW_FRAMEBUFFER_BINDING, &fbo);
    glGetIntegerv(GL_READ_FRAMEBUFFER_BINDING, &read_fbo);
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
    glBindFramebuffer(GL_READ_FRAMEBUFFER, GLuint(read_fbo));
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
        u_out_size = -1, u_grid = -1, u_palette = -1, u_nan_unwritten = -1;
  // The visible part of the data in cells; x1 <= x0 means "all of it".
  float x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  int view_w = -1, view_h = -1;  // the data shape the view above belongs to
  double hint_until = 0;  // ImGui::GetTime() until which "Ctrl+wheel: zoom" shows (the wheel was used without it)
  // What the RGBA texture holds now.
  struct Key {
    unsigned tex = 0;
    int w = 0, h = 0, c = 0, out_w = 0, out_h = 0, kind = 0, grid_c = 0, grid_r = 0, nan_unwritten = 0;
    float lo = 0, hi = 0, x0 = 0, y0 = 0, x1 = 0, y1 = 0;
    bool operator==(const Key& o) const {
      return tex == o.tex && w == o.w && h == o.h && c == o.c && out_w == o.out_w && out_h == o.out_h &&
             nan_unwritten == o.nan_unwritten &&
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
    u_nan_unwritten = glGetUniformLocation(program, "u_nan_unwritten");
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
  if (flags_) glDeleteTextures(1, &flags_);
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
    rgba_ = fbo_ = flags_ = 0;
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
    // The flags the shader writes beside the colours (never written, NaN, masked), read back below.
    if (!flags_) glGenTextures(1, &flags_);
    glBindTexture(GL_TEXTURE_2D, flags_);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, out_w, out_h, 0, GL_RGBA, GL_UNSIGNED_BYTE, nullptr);
    if (!fbo_) glGenFramebuffers(1, &fbo_);
    glBindFramebuffer(GL_DRAW_FRAMEBUFFER, fbo_);
    glFramebufferTexture2D(GL_DRAW_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_TEXTURE_2D, rgba_, 0);
    glFramebufferTexture2D(GL_DRAW_FRAMEBUFFER, GL_COLOR_ATTACHMENT1, GL_TEXTURE_2D, flags_, 0);
    const GLenum buffers[2] = {GL_COLOR_ATTACHMENT0, GL_COLOR_ATTACHMENT1};
    glDrawBuffers(2, buffers);
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
  glUniform1i(st.u_nan_unwritten, nan_unwritten_ ? 1 : 0);
  glDrawArrays(GL_TRIANGLES, 0, 3);
  read_flags(out_w, out_h);
  if (!gl_check("Heatmap::colorize")) throw RuntimeError("GL error colouring a heatmap: " + gl_first_error());
}

// The flags of every pixel, folded into one byte per pixel column (bit 1 never written, bit 2 NaN) and
// into what the whole image holds.
void Heatmap::read_flags(int out_w, int out_h) {
  std::vector<unsigned char> px(size_t(out_w) * size_t(out_h) * 4);
  glBindFramebuffer(GL_READ_FRAMEBUFFER, fbo_);
  glReadBuffer(GL_COLOR_ATTACHMENT1);
  glBindBuffer(GL_PIXEL_PACK_BUFFER, 0);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadPixels(0, 0, out_w, out_h, GL_RGBA, GL_UNSIGNED_BYTE, px.data());
  glReadBuffer(GL_COLOR_ATTACHMENT0);
  column_flags_.assign(size_t(out_w), 0);
  found_ = Found();
  for (int y = 0; y < out_h; ++y)
    for (int x = 0; x < out_w; ++x) {
      const unsigned char* f = &px[(size_t(y) * size_t(out_w) + size_t(x)) * 4];
      column_flags_[size_t(x)] |= (f[0] > 127 ? 1 : 0) | (f[1] > 127 ? 2 : 0);
      found_.masked = found_.masked || f[2] > 127;
    }
  for (unsigned char c : column_flags_) found_.unwritten = found_.unwritten || (c & 1), found_.nan = found_.nan || (c & 2);
}

// Ctrl + wheel zooms around the pointer, a drag pans, a double click resets (the view kept in cells).
void Heatmap::interact(const ImVec2& pos, const ImVec2& sz, float W, float H, bool hovered) {
  State& st = *st_;
  const ImGuiIO& io = ImGui::GetIO();
  const float spx = (st.x1 - st.x0) / sz.x, spy = (st.y1 - st.y0) / sz.y;  // cells per pixel
  // The wheel scrolls the window unless Ctrl is held: a heatmap sliding under the pointer while the
  // page scrolls must not take the wheel.
  if (hovered && io.KeyCtrl) {
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
  }
  if (hovered && ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) reset_view();
  if (hovered && !io.KeyCtrl && io.MouseWheel != 0.0f) st.hint_until = ImGui::GetTime() + 2.0;
  if (ImGui::IsItemActive() && (ImGui::IsMouseDragging(ImGuiMouseButton_Left) ||
                                ImGui::IsMouseDragging(ImGuiMouseButton_Right) ||
                                ImGui::IsMouseDragging(ImGuiMouseButton_Middle))) {
    const float nw = st.x1 - st.x0, nh = st.y1 - st.y0;
    st.x0 = std::clamp(st.x0 - io.MouseDelta.x * spx, 0.0f, W - nw), st.x1 = st.x0 + nw;
    st.y0 = std::clamp(st.y0 - io.MouseDelta.y * spy, 0.0f, H - nh), st.y1 = st.y0 + nh;
  }
  if (st.x1 <= st.x0 || st.y1 <= st.y0) st.x0 = 0, st.y0 = 0, st.x1 = W, st.y1 = H;
}

// Highlight bands: a translucent fill with a bright outline on a dark halo (visible on light and dark colours
// alike), at least 3 pixels thick.
void Heatmap::draw_bands(ImDrawList* dl, const ImVec2& pos, const ImVec2& sz, int w, int h) const {
  const State& st = *st_;
  const ImVec2 end(pos.x + sz.x, pos.y + sz.y);
  const float spx = (st.x1 - st.x0) / sz.x, spy = (st.y1 - st.y0) / sz.y;  // cells per pixel
  const float cw = 1.0f / spx, ch = 1.0f / spy;                              // pixels per cell
  const ImU32 band_fill = IM_COL32(255, 255, 255, 40), band_line = IM_COL32(255, 255, 255, 230),
              band_halo = IM_COL32(0, 0, 0, 170);
  if (hl_row_ >= 0 && hl_row_ < h) {
    float a = pos.y + (float(hl_row_) - st.y0) * ch, b = pos.y + (float(hl_row_ + 1) - st.y0) * ch;
    if (b - a < 3) a = (a + b) * 0.5f - 1.5f, b = a + 3;
    dl->AddRectFilled(ImVec2(pos.x, a), ImVec2(end.x, b), band_fill);
    dl->AddRect(ImVec2(pos.x - 1, a - 1), ImVec2(end.x + 1, b + 1), band_halo, 0, 0, 3.0f);
    dl->AddRect(ImVec2(pos.x - 1, a - 1), ImVec2(end.x + 1, b + 1), band_line, 0, 0, 1.5f);
  }
  if (hl_col_ >= 0 && hl_col_ < w) {
    float a = pos.x + (float(hl_col_) - st.x0) * cw, b = pos.x + (float(hl_col_ + 1) - st.x0) * cw;
    if (b - a < 3) a = (a + b) * 0.5f - 1.5f, b = a + 3;
    dl->AddRectFilled(ImVec2(a, pos.y), ImVec2(b, end.y), band_fill);
    dl->AddRect(ImVec2(a - 1, pos.y - 1), ImVec2(b + 1, end.y + 1), band_halo, 0, 0, 3.0f);
    dl->AddRect(ImVec2(a - 1, pos.y - 1), ImVec2(b + 1, end.y + 1), band_line, 0, 0, 1.5f);
  }
}

// The cell under the pointer (the image is hovered): outlined where cells are 4 pixels or more, and logged.
HeatmapHover Heatmap::hover_cell(const char* id, ImDrawList* dl, const ImVec2& pos, const ImVec2& sz, int w,
                                 int h) const {
  const State& st = *st_;
  const ImGuiIO& io = ImGui::GetIO();
  const float spx = (st.x1 - st.x0) / sz.x, spy = (st.y1 - st.y0) / sz.y;  // cells per pixel
  const float cw = 1.0f / spx, ch = 1.0f / spy;                              // pixels per cell
  HeatmapHover hover;
  hover.active = true;
  hover.col = std::clamp(int(std::floor(st.x0 + (io.MousePos.x - pos.x) * spx)), 0, w - 1);
  hover.row = std::clamp(int(std::floor(st.y0 + (io.MousePos.y - pos.y) * spy)), 0, h - 1);
  if (ui_log::is_open()) {
    static std::string last;  // one line per cell entered, not per frame
    const std::string line = std::string("hover heatmap ") + id + " col " + std::to_string(hover.col) + " row " +
                             std::to_string(hover.row);
    if (line != last) ui_log::event(line), last = line;
  }
  if (cw >= 4 && ch >= 4) {
    const ImVec2 a(pos.x + (float(hover.col) - st.x0) * cw, pos.y + (float(hover.row) - st.y0) * ch);
    const ImVec2 b(pos.x + (float(hover.col + 1) - st.x0) * cw, pos.y + (float(hover.row + 1) - st.y0) * ch);
    dl->AddRect(ImVec2(a.x - 1, a.y - 1), ImVec2(b.x + 1, b.y + 1), IM_COL32(0, 0, 0, 200), 0, 0, 3.0f);
    dl->AddRect(a, b, IM_COL32(255, 255, 255, 255), 0, 0, 1.5f);
  }
  return hover;
}

// Top right: the zoom and how to leave it, or for a moment after the plain wheel, how to zoom.
void Heatmap::draw_corner(ImDrawList* dl, const ImVec2& pos, const ImVec2& sz, float W, float H, bool hovered) const {
  const State& st = *st_;
  const ImVec2 end(pos.x + sz.x, pos.y + sz.y);
  const bool zoomed = st.x0 > 0 || st.y0 > 0 || st.x1 < W || st.y1 < H;
  std::string corner;
  if (zoomed) {
    char buf[96];
    snprintf(buf, sizeof(buf), "zoom %.0f%%  (drag: move, double-click: reset)", 100.0f * W / (st.x1 - st.x0));
    corner = buf;
  } else if (hovered && ImGui::GetTime() < st.hint_until) {
    corner = "Ctrl+wheel: zoom";
  }
  if (corner.empty()) return;
  const ImVec2 ts = ImGui::CalcTextSize(corner.c_str());
  dl->PushClipRect(pos, end, true);
  dl->AddRectFilled(ImVec2(end.x - ts.x - 10, pos.y + 2), ImVec2(end.x - 2, pos.y + ts.y + 6), IM_COL32(0, 0, 0, 170), 3);
  dl->AddText(ImVec2(end.x - ts.x - 6, pos.y + 4), IM_COL32(230, 230, 230, 255), corner.c_str());
  dl->PopClipRect();
}

// What a test reads: where the marks stand (pixel columns of the image), and the key's entries, on each change.
void Heatmap::log_marks(const char* id) const {
  if (!ui_log::is_open()) return;
  std::string marks;
  for (size_t x = 0; x < column_flags_.size(); ++x)
    if (column_flags_[x] & 1) marks += (marks.empty() ? "" : ",") + std::to_string(x);
  static std::map<std::string, std::string> logged;
  const std::string line = std::string("heatmap ") + id + " unwritten columns [" + marks + "] key" +
                           (found_.unwritten ? " never-written" : "") + (found_.nan ? " nan" : "");
  if (logged[id] != line) ui_log::event(line), logged[id] = line;
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
  interact(pos, sz, W, H, hovered);
  if (ui_log::is_open()) {
    // The part of the data shown, in cells, on each change (zoom, pan, reset): "view heatmap ID x0 y0 x1 y1".
    char v[160];
    std::snprintf(v, sizeof v, "view heatmap %s %.1f %.1f %.1f %.1f", id, st.x0, st.y0, st.x1, st.y1);
    static std::map<std::string, std::string> logged;
    if (logged[id] != v) ui_log::event(v), logged[id] = v;
  }

  // Colour at framebuffer resolution, only when something changed.
  const ImVec2 fb_scale = ImGui::GetIO().DisplayFramebufferScale;
  const int out_w = std::clamp(int(std::lround(sz.x * std::max(1.0f, fb_scale.x))), 1, kMaxOutput);
  const int out_h = std::clamp(int(std::lround(sz.y * std::max(1.0f, fb_scale.y))), 1, kMaxOutput);
  State::Key key{data.gl_id(), data.width(), data.height(), data.channels(), out_w, out_h,
                 int(scale_.kind), grid_cols_, grid_rows_, nan_unwritten_ ? 1 : 0, scale_.lo, scale_.hi,
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
  draw_bands(dl, pos, sz, data.width(), data.height());
  if (hovered) hover = hover_cell(id, dl, pos, sz, data.width(), data.height());
  dl->PopClipRect();
  dl->AddRect(ImVec2(pos.x - 1, pos.y - 1), ImVec2(end.x + 1, end.y + 1), IM_COL32(90, 94, 102, 255));
  draw_corner(dl, pos, sz, W, H, hovered);
  draw_column_marks(pos, sz);

  audit::widget(std::string("heatmap '") + id + "'", pos, end);
  ui_log::place("heatmap", id, pos.x, pos.y, end.x, end.y);
  log_marks(id);
  if (scale_.kind != ColorScale::Kind::Categorical && colorbar_) {
    ImGui::SameLine(0, 0);
    colorbar(scale_, ImVec2(colorbar_width(), sz.y));
  }
  draw_key(sz.x + colorbar_width());
  ImGui::PopID();
  return hover;
}

namespace {
// The swatches of the key: the patterns the shader draws, at the key's size.
void swatch_unwritten(ImDrawList* dl, ImVec2 a, float s) {
  const float q = std::max(2.0f, std::floor(s / 3));
  for (int j = 0; j * q < s; ++j)
    for (int i = 0; i * q < s; ++i)
      dl->AddRectFilled(ImVec2(a.x + i * q, a.y + j * q), ImVec2(std::min(a.x + s, a.x + (i + 1) * q), std::min(a.y + s, a.y + (j + 1) * q)),
                        ((i + j) & 1) ? IM_COL32(15, 15, 15, 255) : IM_COL32(219, 36, 36, 255));
}
void swatch_nan(ImDrawList* dl, ImVec2 a, float s) {
  dl->AddRectFilled(a, ImVec2(a.x + s, a.y + s), IM_COL32(222, 64, 222, 255));
  dl->PushClipRect(a, ImVec2(a.x + s, a.y + s), true);
  const float step = std::max(4.0f, std::floor(s / 3));
  for (float t = -s; t < s; t += step)
    dl->AddLine(ImVec2(a.x + t, a.y), ImVec2(a.x + t + s, a.y + s), IM_COL32(250, 220, 250, 255), std::max(1.5f, s / 8));
  dl->PopClipRect();
}
}  // namespace

// Above the image, on its column axis: a mark over each run of pixel columns holding a never-written
// cell (red) or a NaN (magenta), at least a few pixels wide however narrow the run, so that one
// unwritten column among a thousand is seen even where it is a pixel wide.
void Heatmap::draw_column_marks(const ImVec2& pos, const ImVec2& size) const {
  if (column_flags_.empty() || (!found_.unwritten && !found_.nan)) return;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float h = std::max(4.0f, std::floor(ImGui::GetStyle().ItemSpacing.y)), min_w = std::max(7.0f, h * 1.4f);
  const float per_px = size.x / float(column_flags_.size());
  for (int bit : {2, 1}) {  // NaN first, so that a column with both shows red
    const ImU32 col = bit == 1 ? IM_COL32(235, 50, 50, 255) : IM_COL32(222, 64, 222, 255);
    for (size_t x = 0; x < column_flags_.size();) {
      if (!(column_flags_[x] & bit)) {
        ++x;
        continue;
      }
      size_t e = x;
      while (e < column_flags_.size() && (column_flags_[e] & bit)) ++e;
      const float a = pos.x + float(x) * per_px, b = pos.x + float(e) * per_px;
      if (b - a >= min_w) {
        dl->AddRectFilled(ImVec2(a, pos.y - h), ImVec2(b, pos.y - 1), col);
      } else {
        const float c = (a + b) * 0.5f;
        dl->AddTriangleFilled(ImVec2(c - min_w * 0.5f, pos.y - h - 1), ImVec2(c + min_w * 0.5f, pos.y - h - 1),
                              ImVec2(c, pos.y - 1), col);
        dl->AddTriangle(ImVec2(c - min_w * 0.5f, pos.y - h - 1), ImVec2(c + min_w * 0.5f, pos.y - h - 1), ImVec2(c, pos.y - 1),
                        IM_COL32(0, 0, 0, 200));
      }
      x = e;
    }
  }
}

// Under the image, while it holds them: what the never-written and NaN patterns mean.
void Heatmap::draw_key(float width) const {
  if (!found_.unwritten && !found_.nan) return;
  const float s = std::floor(ImGui::GetFontSize() * 0.8f);
  const ImGuiStyle& st = ImGui::GetStyle();
  const float start_x = ImGui::GetCursorScreenPos().x;
  bool first = true;
  auto entry = [&](bool shown, void (*sw)(ImDrawList*, ImVec2, float), const char* text) {
    if (!shown) return;
    const float w = s + st.ItemInnerSpacing.x + ImGui::CalcTextSize(text).x;
    if (!first && ImGui::GetItemRectMax().x + st.ItemSpacing.x * 3 + w <= start_x + width) ImGui::SameLine(0, st.ItemSpacing.x * 3);
    first = false;
    const ImVec2 p = ImGui::GetCursorScreenPos();
    const float dy = std::floor((ImGui::GetTextLineHeight() - s) * 0.5f);
    ImGui::Dummy(ImVec2(s, ImGui::GetTextLineHeight()));
    sw(ImGui::GetWindowDrawList(), ImVec2(p.x, p.y + dy), s);
    ImGui::SameLine(0, st.ItemInnerSpacing.x);
    ImGui::TextUnformatted(text);
  };
  entry(found_.unwritten, swatch_unwritten, "never written");
  entry(found_.nan, swatch_nan, "NaN (written by the kernel)");
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
