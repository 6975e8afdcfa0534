// A scoring program for the `command` reward tests — a real child process
// speaking the protocol, built by CMake so CI needs no interpreter.
//
//   command_reward_helper MODE [N]
//
// Every mode reads one JSON line per sample and, unless it misbehaves on
// purpose at sample index N, answers {"score": 1 if response == answer else 0,
// "index": i} (flushed). Misbehaviours at index N:
//   exact            never misbehaves
//   crash            writes "boom at sample N" to stderr and exits with status 3
//   malformed        prints "not json"
//   bare             prints a bare number "1"
//   string_score     prints {"score": "high"}
//   hang             sleeps until killed
//   twice            answers sample N twice
//   banner           prints "loading model..." on stdout before reading anything
//   exit_now         exits 0 at once without reading
//   metadata         answers metadata.weight (a number) instead
//   padded           adds a 2000-character "reason" to every answer (fills pipes quickly)
//   flood            prints 'x' on stdout without end and without a newline
//   flood_stderr     writes 64 MiB to stderr, then answers
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: command_reward_helper MODE [N]\n";
    return 64;
  }
  const std::string mode = argv[1];
  const long bad = argc > 2 ? std::atol(argv[2]) : -1;
  if (mode == "exit_now") return 0;
  if (mode == "banner") std::cout << "loading model..." << std::endl;
  const std::string pad(2000, 'x');
  std::string line;
  while (std::getline(std::cin, line)) {
    auto in = nlohmann::json::parse(line);
    const long i = in.at("index").get<long>();
    if (i == bad) {
      if (mode == "crash") {
        std::cerr << "starting sample " << i << "\nboom at sample " << i << std::endl;
        return 3;
      }
      if (mode == "malformed") {
        std::cout << "not json" << std::endl;
        continue;
      }
      if (mode == "bare") {
        std::cout << "1" << std::endl;
        continue;
      }
      if (mode == "string_score") {
        std::cout << R"({"score": "high"})" << std::endl;
        continue;
      }
      if (mode == "flood") {
        const std::string chunk(1 << 16, 'x');
        while (std::cout.write(chunk.data(), chunk.size())) {
        }
        return 0;
      }
      if (mode == "flood_stderr") {
        const std::string chunk(1 << 16, 'e');
        for (int k = 0; k < 1024; ++k) std::cerr.write(chunk.data(), chunk.size());
        std::cerr << std::endl;
      }
      if (mode == "hang") {
        std::cerr << "thinking hard about sample " << i << std::endl;
        while (true) pause();
      }
    }
    nlohmann::json out;
    out["score"] = in.at("response") == in.at("answer") ? 1.0 : 0.0;
    if (mode == "metadata") out["score"] = in.at("metadata").at("weight");
    out["index"] = i;
    if (mode == "padded") out["reason"] = pad;
    std::cout << out.dump() << std::endl;
    if (mode == "twice" && i == bad) std::cout << out.dump() << std::endl;
  }
  return 0;
}
