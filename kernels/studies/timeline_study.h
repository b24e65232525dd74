// "Inside the fast kernel" (issue 30): what the timeline view concludes from a recording of the instrumented
// Hopper kernels (kernels/measure/timeline.h), with no GL: the recordings embedded at build time
// (docs/perf/timeline-h200.json, made on the GPU machine), each recording's name, title and provenance, the
// numbers the view's summary shows (the tensor cores' busy share per warpgroup, the overlap, what the
// warpgroups did while no product was in flight, the measured TFLOP/s and the cost of recording), the
// notice line comparing a recording with the other path of the same shape where there is one, and the
// time windows the view opens on. app/panels/timeline_view.* draws them as they are.
#pragma once
#include <string>
#include <vector>

#include "kernels/measure/timeline.h"

namespace kl::timeline_study {

using timeline::Cta;
using timeline::Phase;
using timeline::Recording;

// ---- [SECTION] the recordings ---------------------------------------------------------------------------
extern const char* const kEmbeddedName;  // "perf/timeline-h200.json"
extern const char* const kSourcePath;    // "docs/perf/timeline-h200.json", relative to the repository root
// The embedded file, parsed once. RuntimeError if it is missing or bad (a test sees to it that it is not).
const timeline::File& embedded();

// A recording's name for `--set recording=NAME`: "d128", "d128-causal", "d128-wgmma" (a path other than the
// default named), "d128-deterministic" (the backward's dQ mode).
std::string short_name(const Recording& r);
// The names of `kernel`'s recordings in f, in file order, each unique (a repeated name gets "-2", "-3").
struct Named {
  int index = 0;  // into f.recordings
  std::string name;
};
std::vector<Named> named(const timeline::File& f, const std::string& kernel);
// "forward, d = 128, wgmma-persistent-q2-late (the by-shape default), B=2 H=16 L=2048"
std::string title(const Recording& r);
// "forward d=128, wgmma-persistent-q2-late (the by-shape default)": what the recording picker lists.
std::string label(const Recording& r);
// "recorded on NVIDIA H200, 2026-12-02 (CUDA 13.0)"; a recording of the backward's default kernel made before it took
// 80 query rows a step at the recording's shape adds ", when this kernel took 64 query rows a step (it takes 80 at
// this shape now)".
std::string provenance(const Recording& r);
// What a path is: "the by-shape default", "one CTA per tile", "" (the other persistent paths).
std::string path_note(const Recording& r);

// ---- [SECTION] phases as the view names them ---------------------------------------------------------------
// A short name for the key and the lanes ("wait K", "issue S=QK^T", "softmax").
const char* short_label(Phase p);
// A fragment for sentences ("waiting for K's copy", "adding dQ into fp32").
const char* prose(Phase p);

// ---- [SECTION] what the recording adds up to ----------------------------------------------------------------
struct LaneFacts {
  std::string role;
  double in_flight = 0;  // its products in flight, of its span
};
struct CtaFacts {
  int index = 0, sm = 0;
  double start_ns = 0, span_ns = 0;
  double tensor_share = 0;  // some consumer's product in flight, of the CTA's span
  double overlap = 0;       // of the consumers' CUDA-core work, the part under a product
  double before_first_ns = 0, after_last_ns = 0;  // from the CTA's start to its first product; last to its end
  int tiles = 0;                                  // work tiles the CTA took
  std::vector<LaneFacts> lanes;                   // consumers only, in the recording's order
};
struct IdleShare {
  Phase phase = Phase::Setup;
  double share = 0;  // of the consumer lanes' time while no product of the CTA was in flight
};
struct Facts {
  std::vector<CtaFacts> ctas;
  double tensor_share = 0, overlap = 0;         // means over the CTAs (timeline::summarize)
  double ramp_ns = 0, span_ns = 0;              // means over the CTAs: before_first + after_last, and the span
  int tiles_min = 0, tiles_max = 0;
  std::vector<IdleShare> idle;                  // largest first, every phase with some
  double tflops = 0, plain_ms = 0, traced_ms = 0, overhead = 0, recorded_ms = 0, recorded_span_ms = 0;
};
Facts facts(const Recording& r);

// The recording among `all` of the same kernel, shape and dQ mode with another path (the comparison the
// notice draws); -1 where there is none.
int counterpart(const std::vector<Recording>& all, int index);

// The notice line for recording `index` of `all`, every number from facts(): against the counterpart where
// there is one (the share of time a product was in flight, and, for a one-CTA-per-tile kernel against a
// persistent one, the time each CTA spends before its first product and after its last), else what the
// warpgroups did while no product was in flight. Then the measured TFLOP/s.
std::string notice(const std::vector<Recording>& all, int index);

// The summary beside the timeline, one entry a line, every number from facts(): the measured TFLOP/s, the
// cost of recording, the output check, the share with a product in flight and the overlap, what the
// warpgroups did with none, the recorded span against the launch and the clock.
std::vector<std::string> summary_lines(const Recording& r, const Facts& f);

// ---- [SECTION] time windows -----------------------------------------------------------------------------------
struct Window {
  double t0 = 0, t1 = 0;  // ns
};
// The CTA's whole span (aligned: from 0, its own start).
Window whole(const Cta& cta, bool aligned);
// Where the view opens: about four K/V (backward: query) steps of the CTA's first work tile in steady state
// (from the first consumer's third S product to its seventh), so each warpgroup's turns on the tensor cores
// are wide enough to read; the whole span where the tile has fewer steps.
Window steady(const Cta& cta, bool aligned);
// The CTA's first stamp (what "aligned" subtracts).
double cta_start(const Cta& cta);

}  // namespace kl::timeline_study
