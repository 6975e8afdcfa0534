// The report page's peak-memory table (memory_peaks.h): per stage and rank the
// CUDA caching allocator's peaks, the host peak resident set, and hpcrl plan's
// estimate beside them.
#include "hpcrl/trace/memory_peaks.h"

#include "report_parts.h"

namespace hpcrl::trace {

std::string memory_peaks_html(const MemoryPeaks& m) {
  using report::format;
  using report::html_escape;
  std::string os = "<h2>Peak memory per rank</h2>\n";
  if (m.empty())
    return os + "<p id=\"memory-table\" class=\"absent\">metrics.jsonl holds no peak memory (runs of this hpcrl "
                "write each rank's peaks at the end of every stage; trace: {metrics: true} keeps the file).</p>\n";
  os += "<table id=\"memory-table\">\n<tr><th>stage</th><th class=\"n\">rank</th><th class=\"n\">CUDA peak "
        "allocated</th><th class=\"n\">CUDA peak reserved</th><th class=\"n\">host peak RSS</th><th class=\"n\">plan "
        "estimate</th><th class=\"n\">measured / plan</th></tr>\n";
  for (const auto& s : m.stages)
    for (const auto& r : s.ranks) {
      const double ratio = r.measured_over_plan();
      os += "<tr><td>" + std::to_string(s.stage_index) + "-" + html_escape(s.stage) + "</td><td class=\"n\">" +
            std::to_string(r.rank) + "</td><td class=\"n\">" + bytes_text(r.cuda_peak_allocated) +
            "</td><td class=\"n\">" + bytes_text(r.cuda_peak_reserved) + "</td><td class=\"n\">" +
            bytes_text(r.host_peak_rss) + "</td><td class=\"n\">" + bytes_text(r.plan_bytes) + "</td><td class=\"n\">" +
            (std::isfinite(ratio) ? format("%.2f", ratio) : std::string("–")) + "</td></tr>\n";
    }
  os += "</table>\n<p class=\"note\">Each rank's peaks over the stage, written at its end: the CUDA caching "
        "allocator's peak allocated bytes (tensors alive at once) and peak reserved bytes (held from the driver, its "
        "cache included) on run.device: cuda; the process's peak resident set (VmHWM) on every device, which on a "
        "CPU run holds the tensors and also the program, its libraries and data. measured / plan: the CUDA peak "
        "allocated (on a CPU run the host peak resident set) over <code>hpcrl plan</code>'s peak for the rank. " +
        html_escape(m.plan_note.empty() ? std::string("No plan estimate.") : "Plan: " + m.plan_note + ".") +
        "</p>\n";
  return os;
}

}  // namespace hpcrl::trace
