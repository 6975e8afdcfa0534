// A program for the `command` tool tests — a real child process speaking the
// protocol (hpcrl/tools/command_tool.h), built by CMake so CI needs no interpreter.
//
//   tool_helper MODE [ARG]
//
// It reads one request per line, {"id", "trajectory", "name", "arguments"}, and
// answers {"id": <the same>, "content": "<text>"} per line, flushed. Modes:
//   echo           content = the arguments, dumped
//   add            arguments {"a": int, "b": int} → content = a + b
//   reverse-order  reads 2 requests, then answers them (as echo) in reverse order
//   state          content = how many calls this trajectory has made so far (this one included)
//   sleep MS       sleeps MS ms before each answer (as echo)
//   hang           never answers (and ignores the end of its input)
//   crash          on the first request writes "boom" to stderr and exits with status 3
//   garbage        answers "not json"
//   flood          writes 2 MiB without a newline (then waits)
//   error          answers {"id": ..., "error": "bad input"}
//   crash-once F   crashes as `crash` when file F does not exist (creating it), else as add
//   guess          the environment form (a number-guessing game): a reset
//                  {"type": "reset", "answer": "<n>"} starts the trajectory's
//                  episode; a step's action {"guess": g} (or the text of g)
//                  is answered "higher" / "lower" with reward 0, or "correct"
//                  with reward 1 and done; a step of a trajectory never reset
//                  is an error
//   steps          the environment form, answering every step whatever its
//                  action: observation "step K", reward 0.25, done at K = 2
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

using Json = nlohmann::json;

namespace {

void reply(const Json& request, const std::string& content) {
  Json out;
  out["id"] = request.at("id");
  out["content"] = content;
  std::cout << out.dump() << std::endl;  // endl flushes
}

[[noreturn]] void crash() {
  std::cerr << "boom: crashing on purpose" << std::endl;
  std::exit(3);
}

[[noreturn]] void wait_forever() {
  while (true) pause();
}

// The guessing game's reply to a reset or a step.
void answer_guess(const Json& request, std::map<std::string, long>& secret_of) {
  const std::string trajectory = request.at("trajectory");
  Json out{{"id", request.at("id")}};
  if (request.at("type") == "reset") {
    secret_of[trajectory] = std::stol(request.at("answer").get<std::string>());
  } else if (!secret_of.count(trajectory)) {
    out["error"] = "no episode: the trajectory was never reset";
  } else {
    const Json& action = request.at("action");
    const long guess = action.is_object() ? action.at("guess").get<long>() : std::stol(action.get<std::string>());
    const long secret = secret_of[trajectory];
    out["observation"] = guess < secret ? "higher" : guess > secret ? "lower" : "correct";
    out["reward"] = guess == secret ? 1.0 : 0.0;
    out["done"] = guess == secret;
  }
  std::cout << out.dump() << std::endl;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: tool_helper MODE [ARG]\n";
    return 64;
  }
  const std::string mode = argv[1];
  const std::string arg = argc > 2 ? argv[2] : "";
  const std::vector<std::string> modes = {"echo",    "add",   "reverse-order", "state", "sleep",     "hang",
                                          "crash",   "garbage", "flood",       "error", "crash-once", "guess", "steps"};
  if (std::find(modes.begin(), modes.end(), mode) == modes.end()) {
    std::cerr << "tool_helper: unknown mode " << mode << "\n";
    return 64;
  }
  bool crash_now = false;
  if (mode == "crash-once") {
    crash_now = !std::ifstream(arg).good();
    if (crash_now) std::ofstream(arg) << "crashed once\n";
  }
  std::map<std::string, int> calls_of;  // state: per trajectory
  std::vector<Json> held;               // reverse-order: requests not yet answered
  std::map<std::string, long> secret_of;  // guess: per trajectory, from its reset
  std::string line;
  while (std::getline(std::cin, line)) {
    const Json request = Json::parse(line);
    if (mode == "guess") {
      answer_guess(request, secret_of);
      continue;
    }
    if (mode == "steps") {
      Json out{{"id", request.at("id")}};
      if (request.at("type") == "step") {
        const int k = ++calls_of[request.at("trajectory").get<std::string>()];
        out["observation"] = "step " + std::to_string(k);
        out["reward"] = 0.25;
        out["done"] = k >= 2;
      }
      std::cout << out.dump() << std::endl;
      continue;
    }
    const Json& args = request.at("arguments");
    if (mode == "crash" || crash_now) crash();
    if (mode == "hang") continue;
    if (mode == "sleep") std::this_thread::sleep_for(std::chrono::milliseconds(std::atol(arg.c_str())));
    if (mode == "add" || mode == "crash-once") {
      reply(request, std::to_string(args.at("a").get<long>() + args.at("b").get<long>()));
    } else if (mode == "state") {
      reply(request, std::to_string(++calls_of[request.at("trajectory").get<std::string>()]));
    } else if (mode == "reverse-order") {
      held.push_back(request);
      if (held.size() < 2) continue;
      for (auto it = held.rbegin(); it != held.rend(); ++it) reply(*it, it->at("arguments").dump());
      held.clear();
    } else if (mode == "garbage") {
      std::cout << "not json" << std::endl;
    } else if (mode == "flood") {
      const std::string chunk(1 << 16, 'x');
      for (int k = 0; k < 32 && std::cout.write(chunk.data(), chunk.size()); ++k) {
      }
      std::cout.flush();
      wait_forever();
    } else if (mode == "error") {
      std::cout << Json{{"id", request.at("id")}, {"error", "bad input"}}.dump() << std::endl;
    } else {  // echo, sleep
      reply(request, args.dump());
    }
  }
  if (mode == "hang") wait_forever();
  return 0;
}
