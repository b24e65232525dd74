#include "app/cli/cli.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>

#include "app/cli/animate.h"
#include "app/cli/bench.h"
#include "app/cli/bench_frame.h"
#include "app/cli/list.h"
#include "app/cli/measure.h"
#include "app/cli/run.h"
#include "app/cli/shot.h"
#include "app/cli/soak.h"
#include "app/cli/source.h"
#include "app/cli/study.h"
#include "app/cli/timeline.h"
#include "app/cli/tour.h"
#include "app/cli/worker.h"
#include "app/cli/window.h"
#include "app/version.h"
#include "kernels/editable/compile.h"
#include "kernels/editable/launch.h"
#include "kernels/runtime/buffer.h"
#include "kernels/runtime/errors.h"

namespace kl::app {

void make_directories(const std::string& dir, const std::string& option) {
  // Every prefix ending at a '/', then the whole path: `mkdir -p`, naming the first part that fails.
  for (size_t end = dir.find('/', 1);; end = dir.find('/', end + 1)) {
    const std::string part = dir.substr(0, end);
    if (!part.empty() && ::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST)
      throw InputError(option + " " + dir + ": cannot create " + part + " (" + std::strerror(errno) + ")");
    struct stat st{};
    if (!part.empty() && (::stat(part.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)))
      throw InputError(option + " " + dir + ": cannot create " + part + " (" + std::strerror(ENOTDIR) + ")");
    if (end == std::string::npos) return;
  }
}

namespace {

// Every subcommand's options, filled by the parser.
struct Commands {
  cli::Common common;
  cli::WindowOptions window;
  cli::ShotOptions shot;
  cli::RunOptions run;
  cli::StudyOptions study;
  cli::BenchOptions bench;
  cli::TourOptions tour;
  cli::MeasureOptions measure;
  BenchFrameOptions bench_frame;
  cli::SoakCliOptions soak;
  cli::AnimateCliOptions animate;
  cli::SourceOptions source;
  cli::TimelineOptions timeline;
};

// Parses argv; returns -1 to go on, else the exit code (help, version, a parse error: exit 2).
int parse(CLI::App& app, int argc, char** argv) {
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
  return -1;
}

}  // namespace

int run_cli(int argc, char** argv) {
  CLI::App app{"Kernel Ladder: launch real kernels and see what they do, rung by rung."};
  app.set_version_flag("--version", version_text());
  Commands c;
  cli::add_window(app, c.window, c.common);
  CLI::App* shot = cli::add_shot(app, c.shot, c.common);
  CLI::App* run = cli::add_run(app, c.run, c.common);
  CLI::App* list = cli::add_list(app);
  CLI::App* study = cli::add_study(app, c.study, c.common);
  CLI::App* bench = cli::add_bench(app, c.bench, c.common);
  CLI::App* tour = cli::add_tour(app, c.tour, c.common);
  CLI::App* measure = cli::add_measure(app, c.measure, c.common);
  CLI::App* bench_frame = cli::add_bench_frame(app, c.bench_frame, c.common);
  CLI::App* soak = cli::add_soak(app, c.soak, c.common);
  CLI::App* animate = cli::add_animate(app, c.animate, c.common);
  CLI::App* source = cli::add_source(app, c.source);
  CLI::App* timeline = cli::add_timeline(app, c.timeline, c.common);
  CLI::App* worker = cli::add_worker(app);
  if (const int code = parse(app, argc, argv); code >= 0) return code;
  if (*worker) return cli::run_worker();
  try {
    cli::validate_backend(c.common.backend);  // every command: a bad --backend or --size exits 2 before any work
    cli::parse_size(c.common.size, {});
    if (*shot) return cli::run_shot(c.shot, c.common);
    if (*run) return cli::run_run(c.run, c.common);
    if (*list) return cli::run_list();
    if (*study) return cli::run_study(c.study, c.common);
    if (*bench) return cli::run_bench(c.bench, c.common);
    if (*tour) return cli::run_tour(c.tour, c.common);
    if (*soak) return cli::run_soak(c.soak, c.common);
    if (*animate) return cli::run_animate(c.animate, c.common);
    if (*source) return cli::run_source(c.source);
    if (*timeline) return cli::run_timeline(c.timeline, c.common);
    if (*measure) return cli::run_measure(c.measure, c.common);
    if (*bench_frame) return cli::run_bench_frame(c.bench_frame, c.common);
    return cli::run_window(c.window, c.common);
  } catch (const editable::CompileError& e) {
    // An edited kernel that does not compile: the compiler's lines at the user's file, exit 2.
    for (const editable::Diagnostic& d : e.diagnostics) std::fprintf(stderr, "%s\n", d.text().c_str());
    return 2;
  } catch (const editable::FaultError& e) {
    // An edited kernel that misbehaved at run time (out of bounds, fault, time limit, crash): exit 3.
    std::fprintf(stderr, "kernel-ladder: %s\n", e.what());
    return 3;
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
