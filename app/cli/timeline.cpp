#include "app/cli/timeline.h"

#include <sys/stat.h>

#include <cstdio>

#include "kernels/measure/timeline.h"
#include "kernels/runtime/errors.h"
#include "kernels/runtime/params.h"

namespace kl::app::cli {
namespace {

std::vector<ParamSpec> timeline_specs() {
  return {int_param("L", 128, 65536, 4096, "sequence length (Lq = Lk)"),
          choice_param("d", {"64", "128"}, "128", "head dimension"),
          bool_param("causal", false, "the causal mask (bottom-right aligned)"),
          int_param("B", 1, 64, 1, "batch"),
          int_param("H", 1, 128, 16, "heads"),
          bool_param("deterministic", false, "backward: dQ without atomics (its own pass; the main kernel skips dQ)")};
}

timeline::RecordRequest request_of(const TimelineOptions& o, const Common& c) {
  timeline::RecordRequest r;
  r.kernel = o.kernel;
  ParamValues v(timeline_specs());
  for (const std::string& kv : c.sets) v.set(kv);
  r.L = int(v.get_int("L"));
  r.d = std::stoi(v.get_text("d"));
  r.causal = v.get_bool("causal");
  r.B = int(v.get_int("B"));
  r.H = int(v.get_int("H"));
  r.deterministic = v.get_bool("deterministic");
  if (o.kernel == timeline::kBackward && o.path == "auto") r.path = "wgmma";  // the backward's default kernel
  else r.path = o.path;
  r.iterations = o.iterations;
  if (!o.ctas.empty()) timeline::parse_ctas(o.ctas, &r);
  timeline::validate(r);
  return r;
}

bool exists(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

CLI::App* add_timeline(CLI::App& app, TimelineOptions& o, Common& c) {
  CLI::App* cmd = app.add_subcommand(
      "timeline", "record the fast Hopper kernels' timeline (per warp role: loads, tensor-core products, softmax) as JSON");
  cmd->add_option("kernel", o.kernel, std::string(timeline::kForward) + " or " + timeline::kBackward)->required();
  add_set_option(*cmd, c.sets, "L=, d=, causal=, B=, H=, deterministic= (backward) (repeatable)");
  add_backend_option(*cmd, c.backend);
  cmd->add_option("--path", o.path, "the kernel: auto (the by-shape default), or one of the bulk-copy paths");
  cmd->add_option("--ctas", o.ctas, "CTAs to record: indices separated by commas, or all (default: first, middle, last)");
  cmd->add_option("--iterations", o.iterations, "timed launches of each kernel, plain and instrumented (default 20)");
  cmd->add_option("--json", o.json, "write the recording to this file")->required();
  cmd->add_flag("--append", o.append, "add the recording to FILE's recordings (FILE is created if missing)");
  return cmd;
}

int run_timeline(const TimelineOptions& o, const Common& c) {
  if (o.kernel != timeline::kForward && o.kernel != timeline::kBackward)
    throw InputError("timeline " + o.kernel + ": unknown kernel; allowed: " + timeline::kForward + ", " +
                     timeline::kBackward);
  if (c.backend == "cpu")
    throw InputError("timeline: --backend cpu cannot run the Hopper kernels it records; use --backend cuda or auto");
  const timeline::RecordRequest r = request_of(o, c);
  timeline::File file;
  if (o.append && exists(o.json)) file = timeline::load(o.json);  // a bad file is refused before the GPU runs
  file.recordings.push_back(timeline::record(r));
  for (const std::string& line : timeline::summary_lines(file.recordings.back())) std::printf("%s\n", line.c_str());
  timeline::save(file, o.json);
  std::printf("wrote %s (%zu recording%s)\n", o.json.c_str(), file.recordings.size(),
              file.recordings.size() == 1 ? "" : "s");
  return 0;
}

}  // namespace kl::app::cli
