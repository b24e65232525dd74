// The worker process that runs edited kernels, so that a faulty one never takes the app down: the app
// starts `kernel-ladder worker` (its own binary, /proc/self/exe) on first use and hands it each launch
// over a Unix socket, the tensors in one shared-memory file (memfd) that both map; device tensors are
// staged through the host and the worker has its own CUDA context (the app's is never used for an edited
// kernel). The worker compiles (its modules cached there), runs, and answers; the app waits for the run
// at most time_limit() seconds, then kills it (Fault::TimeLimit). A worker that ends without answering
// (a signal, an abort) is Fault::Crash; a device fault ends it too. The next launch starts a fresh one.
#pragma once
#include <string>

#include "kernels/editable/launch.h"

namespace kl::editable::worker {

// Runs one launch of an edited source in the worker; outputs (and the trace hooks) copied back into the
// launch's tensors. Throws CompileError, InputError and RuntimeError as run_in_process would.
Fault run(Backend b, const Source& src, const Launch& l);

// Compiles the edited source in the worker (its modules cached there for the launches that follow) and
// runs nothing: throws CompileError with the diagnostics, or returns. The app compiles this way, never in
// its own process (a CPU build is loaded with dlopen, which runs the source's static initialisers).
void check(Backend b, const Source& src);

// The run's time limit in seconds (default 10; KL_EDIT_TIME_LIMIT in the environment overrides it).
// Compiling is not counted (it has its own limit of 120 s).
double time_limit();
void set_time_limit(double seconds);

// The program started as the worker with the argument `worker`: by default this process's own binary
// (/proc/self/exe); tests, whose binaries are not kernel-ladder, name it (or set KL_WORKER).
void set_program(const std::string& path);

// Ends the current worker, if one runs (the next launch starts a fresh one). Returns whether one ran.
bool stop();
// The worker's process id (0: none running); for tests.
int pid();

// `kernel-ladder worker`: serves launches on file descriptor `fd` until the app closes it. Returns the
// process's exit code.
int serve(int fd);

}  // namespace kl::editable::worker
