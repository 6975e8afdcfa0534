// A small well-formedness check for the HTML `hpcrl report` writes, so the
// report tests need no HTML parser: what the page promises, and no more.
#pragma once

#include <algorithm>
#include <cctype>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace trace_test {

// "" when every element `html` opens is closed in order (void elements and
// "/>" aside), attribute quotes pair up and every '&' starts an entity; else
// the first problem. <style> content is CSS and skipped whole.
inline std::string html_problem(const std::string& html) {
  static const std::set<std::string> kVoid = {"meta", "br", "hr", "img", "input", "link"};
  std::vector<std::string> open;
  size_t i = 0;
  while (i < html.size()) {
    if (html[i] == '&') {
      static const std::regex entity("^&(#[0-9]+|[a-z]+);");
      if (!std::regex_search(html.substr(i, 12), entity)) return "bare '&' at " + std::to_string(i);
      ++i;
      continue;
    }
    if (html[i] != '<') {
      ++i;
      continue;
    }
    size_t end = html.find('>', i);
    if (end == std::string::npos) return "unclosed '<' at " + std::to_string(i);
    std::string tag = html.substr(i + 1, end - i - 1);
    i = end + 1;
    if (tag.rfind("!DOCTYPE", 0) == 0) continue;
    if (std::count(tag.begin(), tag.end(), '"') % 2) return "unpaired quote in <" + tag + ">";
    bool closing = !tag.empty() && tag[0] == '/';
    std::string name;
    for (size_t k = closing ? 1 : 0;
         k < tag.size() && (std::isalnum(static_cast<unsigned char>(tag[k])) || tag[k] == '-'); ++k)
      name += tag[k];
    if (name.empty()) return "not a tag: <" + tag + ">";
    if (closing) {
      if (open.empty() || open.back() != name)
        return "</" + name + "> closes <" + (open.empty() ? std::string("nothing") : open.back()) + ">";
      open.pop_back();
    } else if (tag.back() != '/' && !kVoid.count(name)) {
      open.push_back(name);
      if (name == "style") {
        size_t close = html.find("</style>", i);
        if (close == std::string::npos) return "unclosed <style>";
        i = close;
      }
    }
  }
  return open.empty() ? "" : "<" + open.back() + "> never closed";
}

}  // namespace trace_test
