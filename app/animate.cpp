#include "app/animate.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "app/cli/common.h"
#include "app/shell.h"
#include "kernels/runtime/errors.h"
#include "viz/data_texture.h"
#include "viz/gl_check.h"
#include "viz/render_host.h"

namespace kl::app {
namespace {

constexpr const char* kVaryForm = "expected KEY=FROM..TO[:STEP], e.g. n_cols=961..1089:16";

struct VaryText {
  std::string key, from, to, step;  // step empty when not given
};

[[noreturn]] void malformed(const std::string& text, const std::string& why) {
  throw InputError("--vary " + text + ": " + (why.empty() ? "" : why + "; ") + kVaryForm);
}

VaryText split_vary(const std::string& text) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) malformed(text, "");
  VaryText v;
  v.key = text.substr(0, eq);
  const std::string rest = text.substr(eq + 1);
  const size_t dots = rest.find("..");
  if (dots == std::string::npos) malformed(text, "no FROM..TO");
  v.from = rest.substr(0, dots);
  std::string after = rest.substr(dots + 2);
  const size_t colon = after.find(':');
  if (colon != std::string::npos) {
    v.step = after.substr(colon + 1);
    after.resize(colon);
    if (v.step.empty()) malformed(text, "empty STEP");
  }
  v.to = after;
  if (v.from.empty() || v.to.empty()) malformed(text, "empty FROM or TO");
  return v;
}

bool whole_number(const std::string& s, int64_t* out) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || errno != 0 || *end != '\0') return false;
  *out = v;
  return true;
}

bool real_number(const std::string& s, double* out) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || errno != 0 || *end != '\0' || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

// FROM and TO must be values of the parameter: the same test and wording as --set.
void require_value(const ParamValues& params, const ParamSpec& spec, const std::string& value) {
  ParamValues probe = params;
  try {
    probe.set(spec.name, value);
  } catch (const InputError&) {
    throw InputError("--vary " + spec.name + "=" + value + ": must be " + spec.range_text());
  }
}

void require_frames(const std::string& text, double frames) {
  if (frames > double(kMaxAnimationFrames))
    throw InputError("--vary " + text + ": " + std::to_string(int64_t(frames)) + " frames; the limit is " +
                     std::to_string(kMaxAnimationFrames) + " frames (take a larger STEP or a shorter range)");
}

// Each kind: the syntax first, then FROM and TO against the range, then the frame count.
std::vector<std::string> integer_values(const std::string& text, const VaryText& v, const ParamValues& params,
                                        const ParamSpec& spec) {
  int64_t from = 0, to = 0, step = 1;
  if (!whole_number(v.from, &from) || !whole_number(v.to, &to)) malformed(text, "FROM and TO must be integers");
  if (!v.step.empty() && (!whole_number(v.step, &step) || step < 1))
    malformed(text, "STEP must be an integer >= 1");
  require_value(params, spec, v.from);
  require_value(params, spec, v.to);
  require_frames(text, std::floor(std::fabs(double(to) - double(from)) / double(step)) + 1);
  std::vector<std::string> out;
  const int64_t dir = to >= from ? 1 : -1;
  for (int64_t x = from; dir > 0 ? x <= to : x >= to; x += dir * step) out.push_back(std::to_string(x));
  return out;
}

std::vector<std::string> pow2_values(const std::string& text, const VaryText& v, const ParamValues& params,
                                     const ParamSpec& spec) {
  int64_t from = 0, to = 0, factor = 2;
  if (!whole_number(v.from, &from) || !whole_number(v.to, &to)) malformed(text, "FROM and TO must be integers");
  if (!v.step.empty() && (!whole_number(v.step, &factor) || factor < 2 || !is_power_of_2(factor)))
    malformed(text, "STEP of a power-of-two parameter is a factor, a power of two >= 2");
  require_value(params, spec, v.from);
  require_value(params, spec, v.to);
  std::vector<std::string> out;
  if (to >= from)
    for (int64_t x = from; x <= to; x *= factor) out.push_back(std::to_string(x));
  else
    for (int64_t x = from; x >= to; x /= factor) out.push_back(std::to_string(x));
  return out;  // at most 63 values: never near the frame limit
}

std::string number_text(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

std::vector<std::string> float_values(const std::string& text, const VaryText& v, const ParamValues& params,
                                      const ParamSpec& spec) {
  double from = 0, to = 0, step = 0;
  if (!real_number(v.from, &from) || !real_number(v.to, &to)) malformed(text, "FROM and TO must be numbers");
  if (v.step.empty()) malformed(text, "a number parameter needs a STEP");
  if (!real_number(v.step, &step) || step <= 0) malformed(text, "STEP must be a number > 0");
  require_value(params, spec, v.from);
  require_value(params, spec, v.to);
  const double frames = std::floor(std::fabs(to - from) / step + 1e-9) + 1;
  require_frames(text, frames);
  std::vector<std::string> out;
  const double dir = to >= from ? 1 : -1;
  for (int64_t i = 0; i < int64_t(frames); ++i) out.push_back(number_text(from + dir * double(i) * step));
  return out;
}

}  // namespace

VaryValues parse_vary(const std::string& text, const ParamValues& params) {
  const VaryText v = split_vary(text);
  const ParamSpec* spec = params.spec(v.key);
  if (!spec) {
    std::string known;
    for (const ParamSpec& p : params.specs()) known += (known.empty() ? "" : ", ") + p.name;
    throw InputError("--vary " + text + ": unknown parameter; known: " + (known.empty() ? "none" : known));
  }
  if (spec->kind == ParamSpec::Kind::Choice)
    throw InputError("--vary " + text + ": " + v.key + " is a choice (" + spec->range_text() +
                     "); --vary walks an integer, power-of-two, number or 0/1 parameter");
  VaryValues out;
  out.key = v.key;
  switch (spec->kind) {
    case ParamSpec::Kind::Pow2: out.values = pow2_values(text, v, params, *spec); break;
    case ParamSpec::Kind::Float: out.values = float_values(text, v, params, *spec); break;
    default: out.values = integer_values(text, v, params, *spec); break;
  }
  for (const std::string& value : out.values) require_value(params, *spec, value);
  return out;
}

int gif_delay_cs(int fps) { return int(std::lround(100.0 / fps)); }

GifWriter::Stats render_animation(Shell& s, viz::RenderHost& host, const AnimationJob& job) {
  GifWriter gif(job.out, host.width(), host.height(), gif_delay_cs(job.fps));
  const size_t n = job.vary.values.size();
  const size_t every = std::max<size_t>(1, (n + 9) / 10);
  for (size_t f = 0; f < n; ++f) {
    // A fresh panel per frame: each frame is exactly what `shot` draws at these settings.
    s.panels = make_panels();
    s.current = job.panel;
    Panel& p = *s.panels[job.panel];
    for (const std::string& kv : job.sets) p.params().set(kv);
    p.params().set(job.vary.key, job.vary.values[f]);
    gif.add_frame(cli::render_frame(s, host, 3));
    if (n >= kProgressFrames && ((f + 1) % every == 0 || f + 1 == n)) {
      std::printf("animate: frame %zu/%zu (%s=%s)\n", f + 1, n, job.vary.key.c_str(), job.vary.values[f].c_str());
      std::fflush(stdout);
    }
  }
  gif.close();
  return gif.stats();
}

std::string colour_summary(const GifWriter::Stats& st) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%d frames, %d with every colour exact; %.2f%% of written pixels approximated",
                st.frames, st.exact_frames, st.pixels ? 100.0 * double(st.approximated) / double(st.pixels) : 0.0);
  return buf;
}

int animate_command(const AnimateOptions& o) {
  require_range("--fps", o.fps, 1, 50);
  Shell s = cli::make_shell(o.backend);
  s.sidebar = o.chrome;      // as `shot`: the view alone, or with --chrome what the window shows
  s.show_source = o.chrome;
  const int i = find_panel(s, o.panel);
  if (i < 0) throw InputError("animate " + o.panel + ": unknown panel; known: " + panel_ids(s));
  AnimationJob job;
  job.panel = size_t(i);
  job.sets = o.sets;
  job.fps = o.fps;
  job.out = o.out;
  ParamValues params = s.panels[job.panel]->params();
  for (const std::string& kv : o.sets) params.set(kv);
  job.vary = parse_vary(o.vary, params);
  for (const std::string& kv : o.sets)
    if (kv.substr(0, kv.find('=')) == job.vary.key)
      throw InputError("--set " + kv + ": " + job.vary.key + " is the parameter --vary walks; give it only there");

  auto host = cli::headless({o.width, o.height});
  cli::PanelsBeforeHost panels_first{s};
  s.host_kind = host->kind();
  s.gl_renderer = host->gl_renderer();
  const GifWriter::Stats st = render_animation(s, *host, job);
  std::printf("wrote %s (%dx%d, %s at %d fps; %s; %s, GL_RENDERER %s; %s)\n", o.out.c_str(), host->width(),
              host->height(), o.vary.c_str(), o.fps, colour_summary(st).c_str(), s.ctx.backend.reason.c_str(),
              s.gl_renderer.c_str(), viz::DataTexture::last_interop_status().c_str());
  return viz::gl_error_count() ? 1 : 0;
}

}  // namespace kl::app
