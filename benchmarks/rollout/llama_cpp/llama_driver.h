// What the two llama.cpp driver programs of bench_vs_llama_cpp.sh (llama_greedy,
// llama_batched) share: their log filter and their prompt file. Header-only, as
// the script compiles each driver from its one source file.
#pragma once

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"

// llama.cpp's warnings and errors only: its info lines would bury the results.
inline void quiet_log(enum ggml_log_level level, const char* text, void*) {
  if (level >= GGML_LOG_LEVEL_WARN) std::fputs(text, stderr);
}

// PROMPTS.txt: one prompt per line, token ids separated by spaces; blank lines skipped.
inline std::vector<std::vector<llama_token>> read_prompts(const std::string& path) {
  std::vector<std::vector<llama_token>> prompts;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::vector<llama_token> p;
    long v;
    while (ss >> v) p.push_back(llama_token(v));
    if (!p.empty()) prompts.push_back(p);
  }
  return prompts;
}
