#include "app/cli.h"

#include <CLI/CLI.hpp>
#include <imgui.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <new>
#include <nlohmann/json.hpp>

#include "app/bench_frame.h"
#include "app/measure_export.h"
#include "app/run_outputs.h"
#include "app/settings.h"
#include "app/shell.h"
#include "app/soak.h"
#include "kernels/runtime/buffer.h"
#include "kernels/runtime/errors.h"
#include "kernels/runtime/npy.h"
#include "kernels/runtime/registry.h"
#include "viz/data_texture.h"
#include "viz/gl_check.h"
#include "viz/png.h"
#include "viz/render_host.h"

namespace kl::app {
namespace {

struct Size {
  int w = 0, h = 0;
};

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

// Renders the shell's current panel headlessly for `frames` frames and writes the last one as PNG.
void render_shot(Shell& s, viz::RenderHost& host, const std::string& out, int frames) {
  for (int i = 0; i < frames; ++i) {
    if (!host.begin_frame()) throw RuntimeError("headless host stopped");
    draw_shell(s, float(host.width()), float(host.height()));
    host.end_frame();
  }
  std::vector<uint8_t> rgba;
  int w = 0, h = 0;
  if (!host.read_pixels(rgba, w, h)) throw RuntimeError("could not read the rendered frame back");
  viz::write_png(out, rgba, w, h);
}

// Panels own GL objects: they must go before the host that owns the context. Declared right after the
// host, this clears them first whichever way the scope is left.
struct PanelsBeforeHost {
  Shell& shell;
  ~PanelsBeforeHost() { shell.panels.clear(); }
};

std::unique_ptr<viz::RenderHost> headless(Size size) {
  viz::HostOptions o;
  o.width = size.w;
  o.height = size.h;
  std::string err;
  auto host = viz::make_headless_host(o, &err);
  if (!host) throw RuntimeError("no headless GL context: " + err);
  return host;
}

std::string config_dir() {
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  const char* home = std::getenv("HOME");
  std::string base = xdg && *xdg ? xdg : (home && *home ? std::string(home) + "/.config" : "");
  if (base.empty()) return "";
  ::mkdir(base.c_str(), 0755);
  std::string d = base + "/kernel-ladder";
  ::mkdir(d.c_str(), 0755);
  return d;
}

int cmd_window(const std::string& backend, const std::string& size_text, int frames, const std::string& panel,
               const std::vector<std::string>& sets) {
  Shell s = make_shell(backend);
  auto apply_command_line = [&] {
    if (!panel.empty()) {
      int i = find_panel(s, panel);
      if (i < 0) throw InputError("--panel " + panel + ": unknown panel; known: " + panel_ids(s));
      s.current = size_t(i);
    }
    for (const std::string& kv : sets) s.panels[s.current]->params().set(kv);
  };
  apply_command_line();  // bad input exits 2 before a window opens
  viz::HostOptions o;
  const Size size = parse_size(size_text, {1400, 900});
  o.width = size.w;
  o.height = size.h;
  const std::string dir = config_dir();
  if (!dir.empty()) o.ini_path = dir + "/imgui.ini";
  std::string err;
  auto host = viz::make_window_host(o, &err);
  PanelsBeforeHost panels_first{s};
  if (!host) {
    std::fprintf(stderr,
                 "kernel-ladder: %s; render panels without a display: `kernel-ladder shot PANEL --out FILE.png` "
                 "or `kernel-ladder tour --out DIR`\n",
                 err.c_str());
    return 1;
  }
  SettingsPersistence settings(s, o.ini_path);  // the last run's panel and parameters...
  apply_command_line();                          // ...with --panel and --set on top
  s.host_kind = host->kind();
  s.gl_renderer = host->gl_renderer();
  std::printf("kernel-ladder: %s; %s; GL_RENDERER %s\n", s.ctx.backend.reason.c_str(), host->kind().c_str(),
              s.gl_renderer.c_str());
  if (!settings.summary().empty()) std::printf("kernel-ladder: %s\n", settings.summary().c_str());
  long n = 0, shots = 0;
  while (host->begin_frame()) {
    settings.snapshot();
    draw_shell(s, float(host->width()), float(host->height()));
    host->end_frame();
    if (s.screenshot_requested) {
      s.screenshot_requested = false;
      std::vector<uint8_t> rgba;
      int w = 0, h = 0;
      const std::string file = "kernel-ladder-" + s.panels[s.current]->id() + "-" + std::to_string(++shots) + ".png";
      try {
        if (host->read_pixels(rgba, w, h)) viz::write_png(file, rgba, w, h), s.message = "saved " + file;
      } catch (const std::exception& e) {
        s.message = e.what();
      }
    }
    if (frames > 0 && ++n >= frames) break;
  }
  const int errors = viz::gl_error_count();
  std::printf("kernel-ladder: closed after %ld frames, %d GL errors\n", long(s.ctx.frame), errors);
  if (errors) std::fprintf(stderr, "kernel-ladder: first GL error: %s\n", viz::gl_first_error().c_str());
  return errors ? 1 : 0;
}

int cmd_shot(const std::string& panel, const std::string& out, const std::string& size_text,
             const std::string& backend, const std::vector<std::string>& sets, int frames) {
  Shell s = make_shell(backend);
  s.sidebar = false;
  s.show_source = false;  // shots show the view alone
  const int i = find_panel(s, panel);
  if (i < 0) throw InputError("shot " + panel + ": unknown panel; known: " + panel_ids(s));
  s.current = size_t(i);
  for (const std::string& kv : sets) s.panels[s.current]->params().set(kv);
  auto host = headless(parse_size(size_text, {1400, 900}));
  PanelsBeforeHost panels_first{s};
  s.host_kind = host->kind();
  s.gl_renderer = host->gl_renderer();
  render_shot(s, *host, out, frames);
  std::printf("wrote %s (%dx%d, %s, GL_RENDERER %s; %s)\n", out.c_str(), host->width(), host->height(),
              s.ctx.backend.reason.c_str(), s.gl_renderer.c_str(), viz::DataTexture::last_interop_status().c_str());
  return viz::gl_error_count() ? 1 : 0;
}

int cmd_tour(const std::string& dir, const std::string& size_text, const std::string& backend) {
  Shell s = make_shell(backend);
  s.sidebar = false;
  s.show_source = false;
  ::mkdir(dir.c_str(), 0755);
  struct stat st{};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw InputError("--out " + dir + ": not a directory that can be created");
  auto host = headless(parse_size(size_text, {1400, 900}));
  PanelsBeforeHost panels_first{s};
  s.host_kind = host->kind();
  s.gl_renderer = host->gl_renderer();
  std::string index = "# Kernel Ladder: the tour\n\nRendered headlessly by `kernel-ladder tour` (" + s.ctx.backend.reason +
                      ", " + s.gl_renderer + ").\n\n";
  int k = 0;
  for (size_t i = 0; i < s.panels.size(); ++i) {
    for (const Panel::TourStop& stop : s.panels[i]->tour_stops()) {
      // A fresh panel per stop, so each image shows exactly the named settings on top of the defaults.
      s.panels = make_panels();
      s.current = i;
      std::string settings;
      for (const std::string& kv : stop.settings) {
        s.panels[i]->params().set(kv);
        settings += (settings.empty() ? "" : ", ") + kv;
      }
      char name[256];
      std::snprintf(name, sizeof name, "%02d-%s-%s.png", ++k, s.panels[i]->id().c_str(), stop.name.c_str());
      render_shot(s, *host, dir + "/" + name, 3);
      index += "- [" + s.panels[i]->title() + "](" + name + "): " + (settings.empty() ? "defaults" : settings) + "\n";
      std::printf("wrote %s/%s\n", dir.c_str(), name);
    }
  }
  std::ofstream(dir + "/index.md") << index;
  std::printf("wrote %s/index.md (%d images)\n", dir.c_str(), k);
  return viz::gl_error_count() ? 1 : 0;
}

int cmd_run(const std::string& kernel, const std::vector<std::string>& ins, const std::vector<std::string>& out,
            const std::string& variant, const std::vector<std::string>& sets, const std::string& backend,
            const std::string& weights, const std::string& trace) {
  const KernelEntry* e = find_kernel(kernel);
  if (!e) {
    std::string known;
    for (const KernelEntry& k : kernel_registry()) known += (known.empty() ? "" : ", ") + k.name;
    throw InputError("run " + kernel + ": unknown kernel; known: " + known);
  }
  KernelRunRequest r;
  r.variant = variant.empty() ? e->default_variant : variant;
  bool variant_ok = false;
  for (const std::string& v : e->variants) variant_ok = variant_ok || v == r.variant;
  if (!variant_ok) {
    std::string vs;
    for (const std::string& v : e->variants) vs += (vs.empty() ? "" : "|") + v;
    throw InputError("--variant " + r.variant + ": not a variant of " + kernel + "; one of " + vs);
  }
  r.params = ParamValues(e->params);
  for (const std::string& kv : sets) r.params.set(kv);
  for (const std::string& in : ins) {
    const size_t eq = in.find('=');
    if (eq == std::string::npos || eq == 0) throw InputError("--in " + in + ": expected NAME=FILE.npy");
    const std::string name = in.substr(0, eq);
    bool known = false;
    for (const std::string& n : e->inputs) known = known || n == name;
    for (const std::string& n : e->optional_inputs) known = known || n == name;
    if (!known) {
      std::string names;
      for (const std::string& n : e->inputs) names += (names.empty() ? "" : ", ") + n;
      for (const std::string& n : e->optional_inputs) names += (names.empty() ? "" : ", ") + n + " (optional)";
      throw InputError("--in " + name + ": " + kernel + " takes inputs " + names);
    }
    // Reading holds the file about three times over (stream, copy, array): refuse before, not during.
    const std::string file = in.substr(eq + 1);
    struct stat st{};
    if (::stat(file.c_str(), &st) == 0 && st.st_size > 0)
      mem::require_host(uint64_t(st.st_size) * 3, "--in " + in);
    r.inputs[name] = npy::read(file);
  }
  for (const std::string& n : e->inputs)
    if (!r.inputs.count(n)) throw InputError("--in " + n + "=FILE.npy: missing input of " + kernel);
  const auto outs = parse_outputs(*e, out);
  r.backend = choose_backend(backend).backend;
  KernelRunResult res = e->run(r);
  write_outputs(outs, res, "(" + r.variant + ", " + backend_name(r.backend) + " backend)");
  if (!weights.empty()) {
    auto it = res.outputs.find("weights");
    if (it == res.outputs.end()) throw InputError("--weights: " + kernel + " has no attention weights to write");
    npy::write(weights, it->second);
    std::printf("wrote %s %s\n", weights.c_str(), it->second.shape_text().c_str());
  }
  if (!trace.empty()) {
    // Several .npy files: TRACE_m.npy, TRACE_l.npy, ... (prefix without .npy/.npz).
    std::string prefix = trace;
    for (const char* ext : {".npz", ".npy"})
      if (prefix.size() > 4 && prefix.compare(prefix.size() - 4, 4, ext) == 0) prefix.resize(prefix.size() - 4);
    int written = 0;
    for (const auto& [name, a] : res.outputs) {
      if (name.rfind("trace_", 0) != 0) continue;
      const std::string f = prefix + "_" + name.substr(6) + ".npy";
      npy::write(f, a);
      std::printf("wrote %s %s\n", f.c_str(), a.shape_text().c_str());
      ++written;
    }
    if (!written) throw InputError("--trace: " + kernel + " --variant " + r.variant + " records no trace");
  }
  return 0;
}

int cmd_list() {
  Shell s;
  s.panels = make_panels();
  std::printf("Panels (shot PANEL, --set key=value):\n");
  for (const auto& p : s.panels) {
    std::printf("  %-18s %s\n", p->id().c_str(), p->title().c_str());
    for (const ParamSpec& sp : p->params().specs())
      std::printf("      %-14s default %-10s %s  -- %s\n", sp.name.c_str(), sp.def.c_str(), sp.range_text().c_str(),
                  sp.help.c_str());
  }
  std::printf("\nKernels (run KERNEL --in NAME=FILE.npy ... --out FILE.npy):\n");
  for (const KernelEntry& e : kernel_registry()) {
    std::string vs, ins;
    for (const std::string& v : e.variants) vs += (vs.empty() ? "" : "|") + v;
    for (const std::string& n : e.inputs) ins += (ins.empty() ? "" : ", ") + n;
    std::printf("  %-18s %s\n      inputs: %s;  variants: %s (default %s)\n", e.name.c_str(), e.summary.c_str(),
                ins.c_str(), vs.c_str(), e.default_variant.c_str());
    for (const ParamSpec& sp : e.params)
      std::printf("      %-14s default %-10s %s  -- %s\n", sp.name.c_str(), sp.def.c_str(), sp.range_text().c_str(),
                  sp.help.c_str());
  }
  std::string why;
  const int n = cuda_device_count(&why);
  std::printf("\nBackends: cpu (always)%s\n", n > 0 ? ", cuda" : (", cuda unavailable: " + why).c_str());
  return 0;
}

int cmd_bench(const std::string& kernel, const std::string& json_path, const std::string& backend, bool quick) {
  const BackendChoice b = choose_backend(backend);
  std::vector<const KernelEntry*> todo;
  if (kernel.empty()) {
    for (const KernelEntry& e : kernel_registry())
      if (e.bench) todo.push_back(&e);
  } else {
    const KernelEntry* e = find_kernel(kernel);
    if (!e) throw InputError("bench " + kernel + ": unknown kernel");
    if (!e->bench) throw InputError("bench " + kernel + ": this kernel has no benchmark");
    todo.push_back(e);
  }
  std::printf("%s%s\n", b.reason.c_str(),
              b.backend == Backend::Cpu ? " -- CPU figures, not GPU ones" : "");
  std::vector<bench::Row> rows;
  for (const KernelEntry* e : todo) {
    std::vector<bench::Row> r = e->bench(b.backend, quick);
    rows.insert(rows.end(), r.begin(), r.end());
  }
  std::printf("%s", bench::format_table(rows).c_str());
  if (!json_path.empty()) {
    nlohmann::json j;
    j["backend"] = backend_name(b.backend);
    j["device"] = b.backend == Backend::Cuda ? device_info(b.backend).name : "CPU";
    j["quick"] = quick;
    for (const bench::Row& r : rows)
      j["rows"].push_back({{"kernel", r.kernel}, {"variant", r.variant}, {"shape", r.shape}, {"ms", r.ms},
                           {"gbs", r.gbs}, {"tflops", r.tflops}, {"ratio", r.ratio}, {"baseline", r.baseline}});
    std::ofstream f(json_path);
    if (!f) throw InputError("--json " + json_path + ": cannot write");
    f << j.dump(2) << "\n";
    std::printf("wrote %s\n", json_path.c_str());
  }
  return 0;
}

}  // namespace

int run_cli(int argc, char** argv) {
  CLI::App app{"Kernel Ladder: launch real kernels and see what they do, rung by rung."};
  app.set_version_flag("--version", "kernel-ladder 0.1.0");
  std::string backend = "auto", size_text, panel;
  std::vector<std::string> sets;
  int frames = 0;
  app.add_option("--backend", backend, "auto|cuda|cpu")->capture_default_str();
  app.add_option("--size", size_text, "window size WIDTHxHEIGHT");
  app.add_option("--frames", frames, "close the window after N frames (tests)")->check(CLI::NonNegativeNumber);
  app.add_option("--panel", panel, "panel to open");
  app.add_option("--set", sets, "key=value for the opened panel");

  auto* shot = app.add_subcommand("shot", "render one panel headlessly to PNG");
  std::string shot_panel, shot_out;
  int shot_frames = 3;
  shot->add_option("panel", shot_panel, "panel id (see list)")->required();
  shot->add_option("--out", shot_out, "PNG file")->required();
  shot->add_option("--size", size_text, "WIDTHxHEIGHT (default 1400x900)");
  shot->add_option("--backend", backend, "auto|cuda|cpu");
  shot->add_option("--set", sets, "key=value (repeatable)");
  shot->add_option("--frames", shot_frames, "frames rendered before the capture")->check(CLI::Range(1, 1000));

  auto* run = app.add_subcommand("run", "run a kernel on .npy inputs");
  std::string kernel, variant, weights, trace;
  std::vector<std::string> ins, out;
  run->add_option("kernel", kernel, "kernel name (see list)")->required();
  run->add_option("--in", ins, "NAME=FILE.npy (float32, C order; repeatable)");
  run->add_option("--out", out, "FILE.npy (the first output) or NAME=FILE.npy (repeatable)")->required();
  run->add_option("--variant", variant, "kernel variant");
  run->add_option("--set", sets, "key=value (repeatable)");
  run->add_option("--backend", backend, "auto|cuda|cpu");
  run->add_option("--weights", weights, "also write the attention weights (.npy)");
  run->add_option("--trace", trace, "also write the recorded trace (PREFIX_NAME.npy files)");

  auto* list = app.add_subcommand("list", "panels, kernels, variants and parameters with their ranges");

  auto* bench = app.add_subcommand("bench", "measure kernels against baselines measured in the same run");
  std::string bench_kernel, json;
  bool quick = false;
  bench->add_option("kernel", bench_kernel, "kernel (default: all)");
  bench->add_option("--json", json, "write the results as JSON");
  bench->add_option("--backend", backend, "auto|cuda|cpu");
  bench->add_flag("--quick", quick, "small sizes (smoke test)");

  auto* tour = app.add_subcommand("tour", "render every panel at named settings, with an index");
  std::string tour_out;
  tour->add_option("--out", tour_out, "directory")->required();
  tour->add_option("--size", size_text, "WIDTHxHEIGHT");
  tour->add_option("--backend", backend, "auto|cuda|cpu");

  auto* measure = app.add_subcommand("measure", "the Measure view's measurements, no window: bandwidth, fusion, "
                                                 "FlashAttention against a GEMM ceiling");
  std::string measure_json, measure_csv;
  bool measure_quick = false;
  measure->add_option("--json", measure_json, "write the numbers and the machine as JSON");
  measure->add_option("--csv", measure_csv, "write the numbers and the machine as CSV");
  measure->add_option("--backend", backend, "auto|cuda|cpu");
  measure->add_flag("--quick", measure_quick, "fewer, smaller sizes");

  auto* bench_frame_cmd = app.add_subcommand(
      "bench-frame", "frame time of a recomputed attention-weight heatmap: CUDA-GL interop vs copy + upload");
  BenchFrameOptions bf;
  bench_frame_cmd->add_option("--size", bf.size, "L (default 4096 on CUDA, 512 on the CPU)");
  bench_frame_cmd->add_option("--frames", bf.frames, "timed frames per path");
  bench_frame_cmd->add_option("--json", bf.json, "write the results as JSON");
  bench_frame_cmd->add_option("--png", bf.png, "write the last frame as PNG");
  bench_frame_cmd->add_option("--backend", backend, "auto|cuda|cpu");

  auto* soak = app.add_subcommand("soak", "render many headless frames over every panel and parameter extreme; "
                                          "report memory growth, GL and CUDA errors");
  SoakOptions so;
  std::string soak_size;
  soak->add_option("--frames", so.frames, "frames to render (default 10000)")->check(CLI::Range(1L, 1000000000L));
  soak->add_option("--size", soak_size, "WIDTHxHEIGHT (default 1280x800)");
  soak->add_option("--backend", backend, "auto|cuda|cpu");
  soak->add_option("--every", so.every, "frames between parameter changes (default 4)")->check(CLI::Range(1, 1000000));
  soak->add_option("--max-growth-mib", so.max_growth_mib,
                   "allowed growth of host RSS and device memory after the first 100 frames (default 64)")
      ->check(CLI::NonNegativeNumber);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "kernel-ladder: %s (see --help)\n", e.what());
    return 2;
  }
  try {
    if (*shot) return cmd_shot(shot_panel, shot_out, size_text, backend, sets, shot_frames);
    if (*run) return cmd_run(kernel, ins, out, variant, sets, backend, weights, trace);
    if (*list) return cmd_list();
    if (*bench) return cmd_bench(bench_kernel, json, backend, quick);
    if (*tour) return cmd_tour(tour_out, size_text, backend);
    if (*soak) {
      const Size sz = parse_size(soak_size, {1280, 800});
      so.width = sz.w;
      so.height = sz.h;
      so.backend = backend;
      return soak_command(so);
    }
    if (*measure) return measure_command(backend, measure_quick, measure_json, measure_csv);
    if (*bench_frame_cmd) {
      bf.backend = backend;
      return bench_frame(bf);
    }
    return cmd_window(backend, size_text, frames, panel, sets);
  } catch (const InputError& e) {
    std::fprintf(stderr, "kernel-ladder: %s\n", e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    // An allocation sized by the user's input that no check caught first: the same refusal, exit 2.
    std::fprintf(stderr, "kernel-ladder: %s\n", mem::host_refusal_text(0, "").c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kernel-ladder: error: %s\n", e.what());
    return 1;
  }
}

}  // namespace kl::app
