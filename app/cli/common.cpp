#include "app/cli/common.h"

#include <cstdio>

#include "kernels/runtime/errors.h"
#include "kernels/runtime/params.h"
#include "viz/png.h"

namespace kl::app::cli {

void add_backend_option(CLI::App& cmd, std::string& backend) {
  cmd.add_option("--backend", backend, "auto|cuda|cpu")->capture_default_str();
}

void add_size_option(CLI::App& cmd, std::string& size, const std::string& help) {
  cmd.add_option("--size", size, help);
}

void add_set_option(CLI::App& cmd, std::vector<std::string>& sets, const std::string& help) {
  cmd.add_option("--set", sets, help);
}

void validate_backend(const std::string& backend) { choose_backend(backend); }

Size parse_size(const std::string& text, Size def) {
  if (text.empty()) return def;
  int w = 0, h = 0;
  char x = 0, extra = 0;
  if (std::sscanf(text.c_str(), "%d%c%d%c", &w, &x, &h, &extra) != 3 || (x != 'x' && x != 'X'))
    throw InputError("--size " + text + ": expected WIDTHxHEIGHT, e.g. 1400x900");
  if (w < 320 || w > 8192 || h < 240 || h > 8192)
    throw InputError(out_of_range_message("--size", text, "width in [320, 8192], height in [240, 8192]"));
  return {w, h};
}

Shell make_shell(const std::string& backend) {
  Shell s;
  s.ctx.backend = choose_backend(backend);
  s.ctx.device = device_info(s.ctx.backend.backend);
  s.panels = make_panels();
  return s;
}

std::unique_ptr<viz::RenderHost> headless(Size size) {
  viz::HostOptions o;
  o.width = size.w;
  o.height = size.h;
  std::string err;
  auto host = viz::make_headless_host(o, &err);
  if (!host) throw RuntimeError("no headless GL context: " + err);
  return host;
}

std::vector<uint8_t> render_frame(Shell& s, viz::RenderHost& host, int frames) {
  for (int i = 0; i < frames; ++i) {
    if (!host.begin_frame()) throw RuntimeError("headless host stopped");
    draw_shell(s, float(host.width()), float(host.height()));
    host.end_frame();
  }
  std::vector<uint8_t> rgba;
  int w = 0, h = 0;
  if (!host.read_pixels(rgba, w, h) || w != host.width() || h != host.height())
    throw RuntimeError("could not read the rendered frame back");
  return rgba;
}

void render_shot(Shell& s, viz::RenderHost& host, const std::string& out, int frames) {
  viz::write_png(out, render_frame(s, host, frames), host.width(), host.height());
}

std::string joined(const std::vector<std::string>& names, const char* sep) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : sep) + n;
  return s;
}

}  // namespace kl::app::cli
