// What every subcommand shares: the options that the top level and the subcommands both accept
// (--backend, --size, --set, declared through one helper each and validated once), headless rendering,
// and the shell the panels live in. Each subcommand is one file beside this one (shot.cpp, run.cpp,
// ...) with its options struct, add_X(), which declares its options on a CLI::App, and run_X().
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "app/shell.h"
#include "viz/render_host.h"

namespace kl::app::cli {

// Written by the top level and by the subcommands alike (`kernel-ladder --backend cpu tour ...` and
// `kernel-ladder tour --backend cpu ...` mean the same).
struct Common {
  std::string backend = "auto";
  std::string size;               // WIDTHxHEIGHT as typed; empty: the command's default
  std::vector<std::string> sets;  // key=value for the panel or kernel
};

void add_backend_option(CLI::App& cmd, std::string& backend);
void add_size_option(CLI::App& cmd, std::string& size, const std::string& help);
void add_set_option(CLI::App& cmd, std::vector<std::string>& sets, const std::string& help);

// Throws the one-line InputError for a misspelt or unavailable backend; run_cli calls it once for
// every command before the command runs.
void validate_backend(const std::string& backend);

struct Size {
  int w = 0, h = 0;
};
// "1400x900" -> {1400, 900}; empty -> def. Width 320..8192, height 240..8192, else InputError.
Size parse_size(const std::string& text, Size def);

Shell make_shell(const std::string& backend);
std::unique_ptr<viz::RenderHost> headless(Size size);
// Renders the shell's current panel headlessly for `frames` frames and returns the last one (RGBA, the
// host's size), or writes it as PNG.
std::vector<uint8_t> render_frame(Shell& s, viz::RenderHost& host, int frames);
void render_shot(Shell& s, viz::RenderHost& host, const std::string& out, int frames);

// Panels own GL objects: they must go before the host that owns the context. Declared right after the
// host, this clears them first whichever way the scope is left.
struct PanelsBeforeHost {
  Shell& shell;
  ~PanelsBeforeHost() { shell.panels.clear(); }
};

// "a, b, c" of a list of names.
std::string joined(const std::vector<std::string>& names, const char* sep = ", ");

}  // namespace kl::app::cli
