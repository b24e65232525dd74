#include "app/tour_web.h"

#include <cctype>
#include <cstdio>
#include <fstream>
#include <memory>

#include "app/animate.h"
#include "app/shell.h"
#include "kernels/runtime/errors.h"
#include "viz/render_host.h"

namespace kl::app {
namespace {

std::string shell_word(const std::string& w) {
  bool plain = !w.empty();
  for (char c : w)
    plain = plain && (std::isalnum(static_cast<unsigned char>(c)) || std::string("-_./=:,+@%").find(c) != std::string::npos);
  if (plain) return w;
  std::string q = "'";
  for (char c : w) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string common_tail(int width, int height, Backend b, const std::string& file) {
  return " --size " + std::to_string(width) + "x" + std::to_string(height) + " --backend " + backend_name(b) +
         " --out " + shell_word(file);
}

std::string set_words(const std::vector<std::string>& sets) {
  std::string r;
  for (const std::string& kv : sets) r += " --set " + shell_word(kv);
  return r;
}

constexpr const char* kStyle =
    "body{font-family:sans-serif;background:#1b1c20;color:#ddd;max-width:1500px;margin:0 auto;padding:1em 2em}"
    "h1,h2{color:#f0c060}a{color:#8cf}figure{margin:1.5em 0 2.5em 0}"
    "img{max-width:100%;border:1px solid #444;display:block}"
    "figcaption{margin-top:.5em;line-height:1.5}"
    "code{background:#2a2b30;padding:.3em .5em;display:block;white-space:pre-wrap;word-break:break-all}"
    ".tag{background:#3a5a3a;border-radius:3px;padding:0 .4em;margin-right:.4em}";

std::string figure(const TourEntry& e) {
  const std::string f = html_escape(e.file);
  std::string h = "<figure id=\"" + f + "\">\n<a href=\"" + f + "\"><img src=\"" + f + "\" alt=\"" +
                  html_escape(e.panel_title + ": " + e.name + " (" + e.settings + ")") + "\" loading=\"lazy\"></a>\n";
  h += "<figcaption><span class=\"tag\">" + std::string(e.motion.empty() ? "image" : "animation") + "</span><b>" +
       html_escape(e.name) + "</b> &middot; <a href=\"" + f + "\">" + f + "</a><br>\nsettings: " +
       html_escape(e.settings) + "<br>\n";
  if (!e.motion.empty()) h += "varied: " + html_escape(e.motion) + "<br>\n";
  h += "<code>" + html_escape(e.command) + "</code></figcaption>\n</figure>\n";
  return h;
}

}  // namespace

std::string join_settings(const std::vector<std::string>& sets) {
  std::string r;
  for (const std::string& kv : sets) r += (r.empty() ? "" : ", ") + kv;
  return r.empty() ? "defaults" : r;
}

std::string shot_command_line(const std::string& panel, const std::vector<std::string>& sets, int width,
                              int height, Backend b, const std::string& file) {
  return "kernel-ladder shot " + shell_word(panel) + set_words(sets) + common_tail(width, height, b, file);
}

std::string animate_command_line(const std::string& panel, const std::vector<std::string>& sets,
                                 const std::string& vary, int fps, int width, int height, Backend b,
                                 const std::string& file) {
  return "kernel-ladder animate " + shell_word(panel) + " --vary " + shell_word(vary) + set_words(sets) +
         " --fps " + std::to_string(fps) + common_tail(width, height, b, file);
}

std::string html_escape(const std::string& text) {
  std::string r;
  r.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': r += "&amp;"; break;
      case '<': r += "&lt;"; break;
      case '>': r += "&gt;"; break;
      case '"': r += "&quot;"; break;
      case '\'': r += "&#39;"; break;
      default: r += c;
    }
  }
  return r;
}

std::string tour_html(const std::string& about, const std::vector<TourEntry>& entries) {
  std::vector<std::string> panels;  // titles, first appearance first
  for (const TourEntry& e : entries) {
    bool seen = false;
    for (const std::string& p : panels) seen = seen || p == e.panel_title;
    if (!seen) panels.push_back(e.panel_title);
  }
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                  "<title>Kernel Ladder: the tour</title>\n<style>" + std::string(kStyle) +
                  "</style>\n</head>\n<body>\n<h1>Kernel Ladder: the tour</h1>\n<p>" + html_escape(about) +
                  "</p>\n<ul>\n";
  for (size_t i = 0; i < panels.size(); ++i)
    h += "<li><a href=\"#panel-" + std::to_string(i + 1) + "\">" + html_escape(panels[i]) + "</a></li>\n";
  h += "</ul>\n";
  for (size_t i = 0; i < panels.size(); ++i) {
    h += "<h2 id=\"panel-" + std::to_string(i + 1) + "\">" + html_escape(panels[i]) + "</h2>\n";
    for (const TourEntry& e : entries)
      if (e.panel_title == panels[i]) h += figure(e);
  }
  return h + "</body>\n</html>\n";
}

void write_tour_html(const std::string& dir, const std::string& about, const std::vector<TourEntry>& entries) {
  const std::string path = dir + "/index.html";
  std::ofstream f(path);
  f << tour_html(about, entries);
  if (!f.flush()) throw RuntimeError(path + ": cannot write");
}

void tour_animations(Shell& s, viz::RenderHost& host, const std::string& dir, std::vector<TourEntry>* entries,
                     int* k) {
  const std::vector<std::unique_ptr<Panel>> panels = make_panels();  // what to animate; drawn from fresh ones
  for (size_t i = 0; i < panels.size(); ++i) {
    for (const Panel::Animation& a : panels[i]->animations()) {
      AnimationJob job;
      job.panel = i;
      job.sets = a.settings;
      job.fps = a.fps;
      ParamValues params = panels[i]->params();
      for (const std::string& kv : a.settings) params.set(kv);
      job.vary = parse_vary(a.vary, params);
      char name[256];
      std::snprintf(name, sizeof name, "%02d-%s-%s.gif", ++*k, panels[i]->id().c_str(), a.name.c_str());
      job.out = dir + "/" + name;
      const GifWriter::Stats st = render_animation(s, host, job);
      TourEntry e;
      e.file = name;
      e.panel_title = panels[i]->title();
      e.name = a.name;
      e.settings = join_settings(a.settings);
      e.motion = a.vary + ", " + std::to_string(st.frames) + " frames at " + std::to_string(a.fps) + " fps";
      e.command = animate_command_line(panels[i]->id(), a.settings, a.vary, a.fps, host.width(), host.height(),
                                       s.ctx.backend.backend, name);
      entries->push_back(e);
      std::printf("wrote %s (%s)\n", job.out.c_str(), colour_summary(st).c_str());
    }
  }
}

}  // namespace kl::app
