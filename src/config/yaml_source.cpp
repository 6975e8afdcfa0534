// Reading a pipeline file into the position-carrying YNode tree (yaml_node.h):
// file checks a YAML parser would report badly (missing, a directory, binary,
// empty), yaml-cpp's parse with its 0-based marks turned into 1-based
// line:col, duplicate keys (which yaml-cpp accepts silently), and the reverse
// direction, emitting a tree back to YAML text for config.resolved.yaml.
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "config/yaml_node.h"

namespace hpcrl::config {
namespace stdfs = std::filesystem;

const YNode* YNode::find(const std::string& key) const {
  for (const auto& e : entries)
    if (e.key == key) return &e.value;
  return nullptr;
}

YNode* YNode::find(const std::string& key) {
  for (auto& e : entries)
    if (e.key == key) return &e.value;
  return nullptr;
}

std::string YNode::describe() const {
  switch (kind) {
    case Kind::kNull: return "no value";
    case Kind::kSeq: return items.empty() ? "an empty list" : "a list";
    case Kind::kMap: return "a mapping";
    case Kind::kScalar: break;
  }
  std::string text = scalar.size() > 40 ? scalar.substr(0, 37) + "..." : scalar;
  return quoted ? "the quoted string \"" + text + "\"" : "'" + text + "'";
}

YNode YNode::scalar_node(std::string text, bool quoted) {
  YNode n;
  n.kind = Kind::kScalar;
  n.scalar = std::move(text);
  n.quoted = quoted;
  return n;
}
YNode YNode::map_node() {
  YNode n;
  n.kind = Kind::kMap;
  return n;
}
YNode YNode::seq_node() {
  YNode n;
  n.kind = Kind::kSeq;
  return n;
}

namespace {

// yaml-cpp shares an aliased node instead of copying it, so a file of a few
// lines can stand for a cycle (`a: &x [*x]`) or for 10^9 values ("billion
// laughs"); the conversion to YNode copies, and these bounds stop it with the
// line instead of a stack overflow or the OOM killer. A pipeline file has a few
// hundred values and is nested less than ten deep.
constexpr int kMaxDepth = 64;
constexpr size_t kMaxPipelineBytes = size_t(1) << 20;  // 1 MiB: the largest shipped pipeline is ~3 KB
constexpr size_t kMaxValues = 100000;

struct Converter {
  const std::string& file;
  const std::string& set_arg;
  Diagnostics& diag;
  size_t values = 0;
  bool exceeded = false;  // a bound was hit: the result is incomplete

  // The first `segments` parts of a path ("a.b[0]"): a cycle's path repeats forever.
  static std::string path_head(const std::string& path, int segments) {
    for (size_t i = 1; i < path.size(); ++i)
      if ((path[i] == '.' || path[i] == '[') && --segments == 0) return path.substr(0, i) + "…";
    return path;
  }

  // False (and one error) once `n` would go past a bound.
  bool within_bounds(const YAML::Node& n, const std::string& path, int depth) {
    if (exceeded) return false;
    if (depth > kMaxDepth) {
      diag.error(at(n.Mark()), path_head(path, 3),
                 "is nested more than " + std::to_string(kMaxDepth) +
                     " levels deep (an alias inside the node it names, such as `a: &x [*x]`, never ends)",
                 "write the values out instead of an alias to an enclosing node");
    } else if (++values > kMaxValues) {
      diag.error(at(n.Mark()), path,
                 "makes the file more than " + std::to_string(kMaxValues) +
                     " values long (aliases of aliases multiply: the \"billion laughs\" pattern)",
                 "write the values out; a pipeline file needs no nested aliases");
    } else {
      return true;
    }
    exceeded = true;
    return false;
  }

  SourcePos at(const YAML::Mark& m) const {
    SourcePos p;
    p.file = file;
    if (!set_arg.empty()) {
      p.set_arg = set_arg;
    } else if (m.line >= 0) {
      p.line = m.line + 1;
      p.col = m.column + 1;
    }
    return p;
  }

  // `fallback` positions values yaml-cpp marks badly (an empty value is marked
  // at the start of the next line; the key is where the user looks).
  YNode convert(const YAML::Node& n, const std::string& path, const SourcePos* fallback, int depth = 0) {
    YNode out;
    out.pos = at(n.Mark());
    if (!within_bounds(n, path, depth)) return out;
    switch (n.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null:
        out.kind = YNode::Kind::kNull;
        if (fallback && (out.pos.line == 0 || out.pos.line > fallback->line)) out.pos = *fallback;
        break;
      case YAML::NodeType::Scalar:
        out.kind = YNode::Kind::kScalar;
        out.scalar = n.Scalar();
        out.quoted = n.Tag() == "!";
        break;
      case YAML::NodeType::Sequence: {
        out.kind = YNode::Kind::kSeq;
        size_t i = 0;
        for (const auto& item : n) {
          out.items.push_back(convert(item, path + "[" + std::to_string(i) + "]", nullptr, depth + 1));
          ++i;
        }
        break;
      }
      case YAML::NodeType::Map: {
        out.kind = YNode::Kind::kMap;
        for (auto it = n.begin(); it != n.end(); ++it) {
          SourcePos key_pos = at(it->first.Mark());
          if (!it->first.IsScalar()) {
            diag.error(key_pos, path, "a key must be a plain word, not " +
                                          std::string(it->first.IsMap() ? "a mapping" : "a list"),
                       "write `name: value`");
            continue;
          }
          std::string key = it->first.Scalar();
          std::string key_path = path.empty() ? key : path + "." + key;
          if (const YEntry* first = find_entry(out, key)) {
            diag.error(key_pos, key_path,
                       "duplicate key '" + key + "' (first written at " + line_col(first->key_pos) + ")",
                       "remove one of the two; YAML keeps only one of them");
            continue;
          }
          out.entries.push_back({key, key_pos, convert(it->second, key_path, &key_pos, depth + 1)});
        }
        break;
      }
    }
    return out;
  }

  static const YEntry* find_entry(const YNode& map, const std::string& key) {
    for (const auto& e : map.entries)
      if (e.key == key) return &e;
    return nullptr;
  }
  static std::string line_col(const SourcePos& p) {
    if (p.from_override()) return p.set_arg;
    return "line " + std::to_string(p.line) + ":" + std::to_string(p.col);
  }
};

// yaml-cpp's messages are terse; add what usually causes them.
std::string syntax_fix(const std::string& text, int line0) {
  std::istringstream in(text);
  std::string l;
  for (int i = 0; std::getline(in, l); ++i) {
    if (i != line0 && i != line0 - 1) continue;
    size_t indent_end = l.find_first_not_of(" \t");
    if (l.find('\t') < indent_end) return "indent with spaces: YAML does not allow tabs for indentation";
  }
  return "check the indentation, colons ('key: value' needs a space after ':'), quotes and brackets here";
}

bool has_document_marker(const std::string& text) {
  std::istringstream in(text);
  std::string l;
  while (std::getline(in, l))
    if (l.rfind("---", 0) == 0 || l.rfind("...", 0) == 0) return true;
  return false;
}

// Several documents: written with `---`, or — without a marker — yaml-cpp
// ending the first document where the indentation changes (a stray indented
// line or item before the top-level keys), which the user has to be shown.
void report_documents(const std::string& text, const std::vector<YAML::Node>& docs, const SourcePos& whole,
                      Diagnostics& diag) {
  if (has_document_marker(text)) {
    diag.error(whole, "", "contains " + std::to_string(docs.size()) + " YAML documents (separated by ---)",
               "keep one pipeline per file");
    return;
  }
  SourcePos p = whole;
  const YAML::Mark first = docs[0].Mark(), second = docs[1].Mark();
  if (whole.set_arg.empty() && second.line >= 0) p.line = second.line + 1, p.col = second.column + 1;
  diag.error(p, "",
             "the top level ends before this line: the lines from line " + std::to_string(first.line + 1) +
                 " are indented (or a '- ' item) where the pipeline's top-level keys begin",
             "start every top-level key (run, models, rewards, data, placement, stages, trace) in column 1 and "
             "remove or indent the stray line before them");
}

// yaml-cpp 0.7 never consumes a token it cannot start a node with at the top
// level (a bare ',' is one): every call for the next document returns another
// empty document at the same place, so YAML::LoadAll builds documents until
// memory runs out (`validate` on a file holding ",", or `--set key=,7]`).
// This pass reads the events only, no nodes, and returns the place where a
// document starts where the one before it started, i.e. where the parser is
// stuck; nothing when it reaches the end.
class DocumentStarts : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> starts;
  size_t events = 0;
  void OnDocumentStart(const YAML::Mark& mark) override { starts.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override { ++events; }
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override { ++events; }
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override { ++events; }
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    ++events;
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    ++events;
  }
  void OnMapEnd() override {}
};

std::optional<YAML::Mark> stuck_parser_mark(const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentStarts starts;
  while (parser.HandleNextDocument(starts)) {
    const auto& s = starts.starts;
    if (s.size() >= 2 && s[s.size() - 1].pos == s[s.size() - 2].pos) return s.back();
    if (s.size() > 1000) return s.back();  // far more documents than any file holds: no progress worth waiting for
  }
  return std::nullopt;
}

}  // namespace

std::optional<YNode> parse_yaml_text(const std::string& text, const std::string& file, Diagnostics& diag,
                                     const std::string& set_arg) {
  SourcePos whole;
  whole.file = file;
  whole.set_arg = set_arg;
  std::vector<YAML::Node> docs;
  try {
    if (auto stuck = stuck_parser_mark(text)) {
      SourcePos p = whole;
      if (set_arg.empty()) p.line = stuck->line + 1, p.col = stuck->column + 1;
      const size_t at = static_cast<size_t>(std::max(stuck->pos, 0));
      const std::string what = at < text.size() ? "'" + text.substr(at, 1) + "'" : "end of the text";
      diag.error(p, "", "YAML syntax error: unexpected " + what + " where a value or key should start",
                 "a ',' separates items only inside [ ] or { }; quote a value that contains one");
      return std::nullopt;
    }
    docs = YAML::LoadAll(text);
  } catch (const YAML::Exception& e) {
    SourcePos p = whole;
    if (set_arg.empty() && e.mark.line >= 0) {
      p.line = e.mark.line + 1;
      p.col = e.mark.column + 1;
    }
    diag.error(p, "", "YAML syntax error: " + e.msg, syntax_fix(text, e.mark.line));
    return std::nullopt;
  }
  if (docs.size() > 1) {
    report_documents(text, docs, whole, diag);
    return std::nullopt;
  }
  if (docs.empty()) {  // empty text: a null document, the caller decides
    YNode empty;
    empty.pos = whole;
    return empty;
  }
  Converter conv{file, set_arg, diag};
  YNode root = conv.convert(docs[0], "", nullptr);
  if (conv.exceeded) return std::nullopt;
  return root;
}

std::optional<YNode> parse_yaml_file(const std::string& path, Diagnostics& diag) {
  SourcePos whole;
  whole.file = path;
  std::error_code ec;
  if (!stdfs::exists(path, ec)) {
    diag.error(whole, "", "no such file", "check the path (it is relative to the current directory)");
    return std::nullopt;
  }
  if (stdfs::is_directory(path, ec)) {
    diag.error(whole, "", "is a directory, not a pipeline file", "give the path of a .yaml file, e.g. configs/quickstart.yaml");
    return std::nullopt;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    diag.error(whole, "", std::string("cannot be read: ") + std::strerror(errno), "check the file's permissions");
    return std::nullopt;
  }
  // Read at most one byte past the bound: an endless device (/dev/zero) or a
  // multi-GB file is refused from its first MiB, not read until std::bad_alloc.
  std::string text(kMaxPipelineBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (size_t nul = text.find('\0'); nul != std::string::npos) {
    diag.error(whole, "", "is not a text file (NUL byte at offset " + std::to_string(nul) + ")",
               "give a YAML pipeline file, not a binary");
    return std::nullopt;
  }
  if (text.size() > kMaxPipelineBytes) {
    diag.error(whole, "", "is larger than " + std::to_string(kMaxPipelineBytes >> 20) + " MiB, far more than a pipeline",
               "give the pipeline's YAML file (data goes in a dataset file named under `data:`)");
    return std::nullopt;
  }
  auto root = parse_yaml_text(text, path, diag);
  if (root && root->is_null()) {
    diag.error(whole, "", "is empty (no YAML content)", "write a pipeline; configs/quickstart.yaml is a complete example");
    return std::nullopt;
  }
  return root;
}

namespace {

void emit(YAML::Emitter& out, const YNode& n) {
  switch (n.kind) {
    case YNode::Kind::kNull: out << YAML::Null; break;
    case YNode::Kind::kScalar:
      if (n.quoted) out << YAML::DoubleQuoted;
      out << n.scalar;
      break;
    case YNode::Kind::kSeq: {
      bool flat = true;
      for (const auto& item : n.items) flat = flat && (item.is_scalar() || item.is_null());
      if (flat) out << YAML::Flow;
      out << YAML::BeginSeq;
      for (const auto& item : n.items) emit(out, item);
      out << YAML::EndSeq;
      break;
    }
    case YNode::Kind::kMap:
      out << YAML::BeginMap;
      for (const auto& e : n.entries) {
        out << YAML::Key << e.key << YAML::Value;
        emit(out, e.value);
      }
      out << YAML::EndMap;
      break;
  }
}

}  // namespace

std::string emit_yaml(const YNode& root) {
  YAML::Emitter out;
  out.SetIndent(2);
  emit(out, root);
  return std::string(out.c_str()) + "\n";
}

}  // namespace hpcrl::config
