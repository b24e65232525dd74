#include "app/measure_export.h"

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kernels/measure/peers.h"
#include "kernels/runtime/errors.h"

namespace kl::app {

const char* const kCsvColumns =
    "section,kernel,variant,shape,size,bytes,flops,ms,gbs,tflops,ratio,device,backend,date,cpu_figures,copy_gbs,"
    "gemm_tflops,sets,launch_bound,l2_bytes,call_us";

std::vector<FusionPair> fusion_pairs(const measure::Results& r) {
  std::vector<FusionPair> out;
  const struct {
    const char *kernel, *fused, *unfused;
  } pairs[] = {{"relu-dropout", "fused", "unfused"}, {"softmax", "fixed", "three_pass"}};
  for (const auto& pr : pairs) {
    double best = 0;
    for (const measure::Point& p : r.points)
      if (p.kernel == pr.kernel && p.variant == pr.unfused && p.size > best && r.find(pr.kernel, pr.fused, p.size))
        best = p.size;
    if (best == 0) continue;
    const measure::Point* f = r.find(pr.kernel, pr.fused, best);
    const measure::Point* u = r.find(pr.kernel, pr.unfused, best);
    FusionPair fp;
    fp.kernel = pr.kernel, fp.fused = pr.fused, fp.unfused = pr.unfused;
    fp.size = best, fp.fused_ms = f->ms, fp.unfused_ms = u->ms;
    fp.fused_bytes_per_elem = f->bytes / best, fp.unfused_bytes_per_elem = u->bytes / best;
    fp.launch_bound = f->launch_bound;
    out.push_back(fp);
  }
  return out;
}

unsigned standing_colour(double ratio, int digits) {
  return peers::ahead(ratio, digits) ? kAheadColour : kBehindColour;
}

unsigned verdict_colour(measure::Verdict v) {
  switch (v) {
    case measure::Verdict::AtCeiling: return kSuccessColour;
    case measure::Verdict::Fair: return kFairColour;
    case measure::Verdict::Low: return kLowColour;
    case measure::Verdict::AboveCeiling: return kAboveCeilingColour;
    case measure::Verdict::LaunchBound: return kLaunchBoundColour;
  }
  return kLowColour;
}

std::string fusion_title(const FusionPair& f) {
  char b[160];
  std::snprintf(b, sizeof b, "%s, N=%s: %.2fx%s", f.kernel == "softmax" ? "softmax" : "ReLU+dropout",
                measure::pow2_name(f.size).c_str(), f.speedup(), f.launch_bound ? " (launch-bound)" : "");
  return b;
}

std::string measure_json(const measure::Results& r) {
  using nlohmann::json;
  const measure::Machine& m = r.machine;
  json j;
  j["machine"] = {{"device", m.device},           {"backend", m.backend},
                  {"date", m.date},               {"cpu_figures", m.cpu_figures},
                  {"quick", m.quick},             {"copy_gbs", m.copy_gbs},
                  {"copy_elements", m.copy_elements}, {"gemm_tflops", m.gemm_tflops},
                  {"gemm", m.gemm_what},          {"gemm_max_rel_err", m.gemm_max_rel_err},
                  {"l2_bytes", m.l2_bytes},       {"call_us", m.call_us}};
  j["complete"] = r.finished;
  j["cancelled"] = r.cancelled;
  j["error"] = r.error;
  j["points"] = json::array();
  for (const measure::Point& p : r.points)
    j["points"].push_back({{"section", p.section}, {"kernel", p.kernel}, {"variant", p.variant}, {"shape", p.shape},
                           {"size", p.size},       {"bytes", p.bytes},   {"flops", p.flops},     {"ms", p.ms},
                           {"gbs", p.gbs},         {"tflops", p.tflops}, {"ratio", p.ratio},
                           {"sets", p.sets},       {"launch_bound", p.launch_bound},
                           {"verdict", measure::verdict_name(measure::verdict(p))}});
  j["fusion"] = json::array();
  for (const FusionPair& f : fusion_pairs(r))
    j["fusion"].push_back({{"kernel", f.kernel}, {"fused", f.fused}, {"unfused", f.unfused}, {"size", f.size},
                           {"fused_ms", f.fused_ms}, {"unfused_ms", f.unfused_ms}, {"speedup", f.speedup()},
                           {"fused_bytes_per_elem", f.fused_bytes_per_elem},
                           {"unfused_bytes_per_elem", f.unfused_bytes_per_elem}, {"launch_bound", f.launch_bound}});
  return j.dump(2) + "\n";
}

namespace {
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}
std::string num(double v) {
  char b[40];
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}
}  // namespace

std::string measure_csv(const measure::Results& r) {
  const measure::Machine& m = r.machine;
  std::string s = std::string(kCsvColumns) + "\n";
  for (const measure::Point& p : r.points) {
    s += csv_field(p.section) + "," + csv_field(p.kernel) + "," + csv_field(p.variant) + "," + csv_field(p.shape) + "," +
         num(p.size) + "," + num(p.bytes) + "," + num(p.flops) + "," + num(p.ms) + "," + num(p.gbs) + "," +
         num(p.tflops) + "," + num(p.ratio) + "," + csv_field(m.device) + "," + csv_field(m.backend) + "," +
         csv_field(m.date) + "," + (m.cpu_figures ? "1" : "0") + "," + num(m.copy_gbs) + "," + num(m.gemm_tflops) +
         "," + std::to_string(p.sets) + "," + (p.launch_bound ? "1" : "0") + "," + std::to_string(m.l2_bytes) + "," +
         num(m.call_us) + "\n";
  }
  return s;
}

void write_text_file(const std::string& path, const std::string& text, const std::string& what) {
  std::ofstream f(path);
  if (!f) throw InputError(what + " " + path + ": cannot write this file");
  f << text;
  if (!f) throw InputError(what + " " + path + ": write failed");
}

int measure_command(const std::string& backend, bool quick, const std::string& json, const std::string& csv) {
  const BackendChoice b = choose_backend(backend);
  measure::Options o;
  o.backend = b.backend;
  o.quick = quick;
  std::printf("measure: %s%s%s\n", b.reason.c_str(), quick ? ", quick sizes" : "",
              b.backend == Backend::Cpu ? " -- CPU figures, not GPU ones" : "");
  int shown = 0;
  const measure::Results r = measure::run(o, nullptr, [&](const measure::Results& so_far, const std::string& label) {
    // The point(s) the previous step added, then the next step's label.
    for (; shown < int(so_far.points.size()); ++shown) {
      const measure::Point& p = so_far.points[size_t(shown)];
      if (p.section == "bandwidth")
        std::printf("      %-28s %-26s %10.4f ms %9.1f GB/s  %.3f of copy (%s; %d buffer set%s)\n", p.series().c_str(),
                    p.shape.c_str(), p.ms, p.gbs, p.ratio, measure::verdict_name(measure::verdict(p)), p.sets,
                    p.sets == 1 ? "" : "s");
      else
        std::printf("      %-28s %-26s %10.4f ms %9.3f TFLOP/s  %.3f of the GEMM\n", p.series().c_str(), p.shape.c_str(),
                    p.ms, p.tflops, p.ratio);
    }
    if (!label.empty()) std::printf("  [%d/%d] %s\n", so_far.steps_done + 1, so_far.steps_total, label.c_str());
    std::fflush(stdout);
  });
  const measure::Machine& m = r.machine;
  std::printf("machine: %s (%s), %s; copy %.1f GB/s at %lld floats; GEMM ceiling %.2f TFLOP/s (%s)\n", m.device.c_str(),
              m.backend.c_str(), m.date.c_str(), m.copy_gbs, (long long)m.copy_elements, m.gemm_tflops, m.gemm_what.c_str());
  std::printf("%s\n", measure::cold_sentence(r).c_str());
  if (!measure::launch_sentence(r).empty()) std::printf("%s\n", measure::launch_sentence(r).c_str());
  for (const FusionPair& f : fusion_pairs(r))
    std::printf("fusion: %s %s %.4f ms vs %s %.4f ms at N=%.0f: %.2fx%s\n", f.kernel.c_str(), f.fused.c_str(), f.fused_ms,
                f.unfused.c_str(), f.unfused_ms, f.size, f.speedup(),
                f.launch_bound ? " (launch-bound: one launch saved, not bytes)" : "");
  if (!json.empty()) write_text_file(json, measure_json(r), "--json"), std::printf("wrote %s\n", json.c_str());
  if (!csv.empty()) write_text_file(csv, measure_csv(r), "--csv"), std::printf("wrote %s\n", csv.c_str());
  if (!r.error.empty()) {
    std::fprintf(stderr, "kernel-ladder: measure: %s\n", r.error.c_str());
    return 1;
  }
  return 0;
}

}  // namespace kl::app
