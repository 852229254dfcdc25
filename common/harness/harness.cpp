#include "harness/harness.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "toolbox/cuda_check.h"
#include "harness/npy.h"
#include "harness/parallel.h"
#include "harness/record.h"

#ifndef LAB_GIT_SHA_DEFAULT
#define LAB_GIT_SHA_DEFAULT "unknown"
#endif

namespace lab {
using json = nlohmann::json;

void print_verdict(bool passed, const std::string& reason, const std::vector<std::string>& details, bool quiet,
                   const std::string& name, const std::string& variant, bool cpu) {
  if (quiet && !passed) {
    std::printf("  check    %s\n", reason.c_str());
    for (const auto& d : shown_details(details, 3)) std::printf("           %s\n", d.c_str());
  }
  std::printf("%s: %s %s%s\n", passed ? "PASS" : "FAIL", name.c_str(), variant.c_str(), cpu ? " (CPU model)" : "");
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB", "PB"};
  int u = 0;
  while (std::fabs(bytes) >= 1000 && u < 5) { bytes /= 1000; ++u; }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.3g %s", bytes, units[u]);
  return buf;
}

namespace {

template <class T>
std::string join(const std::vector<T>& xs) {
  std::ostringstream s;
  for (size_t i = 0; i < xs.size(); ++i) s << (i ? ", " : "") << xs[i];
  return s.str();
}

int64_t host_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? int64_t(pages) * page : INT64_MAX;
}

// The options a section does not have, each with why (the section that has it).
std::vector<std::pair<std::string, std::string>> not_applicable(const Section& s) {
  std::vector<std::pair<std::string, std::string>> out;
  if (!s.paged) out.push_back({"--page-size", "it reads a contiguous K/V cache; paged KV is section 06"});
  if (!s.supports_window) out.push_back({"--window", "sliding windows are section 07"});
  if (!s.has_splits) out.push_back({"--splits", "it does not split the K/V range; split-KV is section 05"});
  if (!s.supports_ragged_kv) out.push_back({"--kv-lens", "every sequence has T_kv keys; ragged lengths are section 05"});
  if (s.consumer_counts.empty()) out.push_back({"--consumers", "it is not warp-specialised; consumer warpgroups are section 08"});
  if (s.kv_tiles.empty()) out.push_back({"--kv-tile", "its K/V tile is fixed; a choice of K/V tiles is section 08's"});
  return out;
}

std::string validate(const Problem& p, const Options& o, const Section& s) {
  auto need_positive = [](const char* name, int v) -> std::string {
    return v >= 1 ? "" : std::string(name) + " must be >= 1 (got " + std::to_string(v) + ")";
  };
  for (auto [name, v] : {std::pair<const char*, int>{"B", p.b}, {"H", p.h}, {"H_kv", p.h_kv},
                         {"T", p.t_q}, {"T_kv", p.t_kv}, {"D", p.d}})
    if (auto m = need_positive(name, v); !m.empty()) return m;
  constexpr int kMaxT = 1 << 24;
  if (p.t_q > kMaxT) return "T=" + std::to_string(p.t_q) + " exceeds the lab's limit of " + std::to_string(kMaxT) + " rows";
  if (p.t_kv > kMaxT) return "T_kv=" + std::to_string(p.t_kv) + " exceeds the lab's limit of " + std::to_string(kMaxT) + " keys";
  // Sizes are int64 products: refuse shapes whose tensors could overflow them before computing any.
  const double q_elems = double(p.b) * p.t_q * p.h * p.d, kv_elems = double(p.b) * p.t_kv * p.h_kv * p.d;
  if (std::max(q_elems, kv_elems) > 1e13) {
    std::ostringstream m;
    m << "Q or K/V would hold " << std::max(q_elems, kv_elems) << " elements: beyond any memory (B, H or T too large)";
    return m.str();
  }
  if (p.h_kv > p.h || p.h % p.h_kv != 0)
    return "H=" + std::to_string(p.h) + " is not a multiple of H_kv=" + std::to_string(p.h_kv) +
           " (each K/V head must serve a whole group of query heads)";
  if (std::find(s.head_dims.begin(), s.head_dims.end(), p.d) == s.head_dims.end())
    return "D=" + std::to_string(p.d) + " is not supported by " + s.name + " (supported: " + join(s.head_dims) + ")";
  if (std::find(s.dtypes.begin(), s.dtypes.end(), p.dtype) == s.dtypes.end()) {
    std::vector<std::string> names;
    for (DType t : s.dtypes) names.push_back(dtype_name(t));
    return std::string("dtype ") + dtype_name(p.dtype) + " is not supported by " + s.name + " (supported: " + join(names) + ")";
  }
  // Options a section does not have are refused whatever their value (0 included), before their
  // values are looked at: one message per option, the same on every section.
  for (const auto& [option, reason] : not_applicable(s))
    if (o.given_option(option)) return option + " is not supported by " + s.name + " (" + reason + ")";
  if (std::find(s.variants.begin(), s.variants.end(), o.variant) == s.variants.end())
    return "unknown variant '" + o.variant + "' for " + s.name + " (variants: " + join(s.variants) + ")";
  for (const auto& [option, variants] : s.variants_of_option)
    if (o.given_option(option) && std::find(variants.begin(), variants.end(), o.variant) == variants.end())
      return option + " applies to --variant " + join(variants) + " of " + s.name + ", not to " + o.variant;
  if (p.window > 0 && !p.causal) return "--window needs --causal (a sliding window is a causal mask)";
  if (o.given_option("--page-size") && (p.page_size < 16 || p.page_size % 16 != 0))
    return "page size " + std::to_string(p.page_size) + " is not a positive multiple of 16";
  // Launch limits, once for every section: each kernel gives every (sequence, head) pair its own
  // index in a grid dimension of at most 65535 blocks.
  if (s.max_b_times_h > 0 && int64_t(p.b) * p.h > s.max_b_times_h)
    return "B*H must be <= " + std::to_string(s.max_b_times_h) + " (one grid dimension per head; got " +
           std::to_string(int64_t(p.b) * p.h) + ")";
  if (!o.bug.empty() && std::find(s.bugs.begin(), s.bugs.end(), o.bug) == s.bugs.end())
    return "unknown bug '" + o.bug + "' for " + s.name +
           (s.bugs.empty() ? std::string(" (this section has none)") : " (bugs: " + join(s.bugs) + ")");
  if (o.splits < 0) return "--splits must be >= 0 (0: automatic)";
  if (!(o.magnitude > 0) || !std::isfinite(o.magnitude)) return "--magnitude must be a positive number";
  if (o.warmup < 0 || o.iters < 0) return "--warmup and --iters must be >= 0";
  if (o.sample_rows < 1) return "--sample-rows must be >= 1";
  if (o.smem_limit_kb != 0 && (o.smem_limit_kb < 48 || o.smem_limit_kb > 1024))
    return "--smem-limit must be 0 (this GPU's) or a size in KB from 48 (what every GPU allows) to 1024";
  // Output paths before anything runs: a run never ends by losing its record or a user's file.
  // (An empty path given is a mistake, not "no file": `--json "$OUT"` with OUT unset.)
  if (o.given_option("--json") || !o.json_path.empty())
    if (std::string m = record_path_problem(o.json_path); !m.empty()) return "--json: " + m;
  if (o.given_option("--dump") || !o.dump_dir.empty())
    if (std::string m = writable_path_problem(o.dump_dir, /*want_dir=*/true); !m.empty()) return "--dump: " + m;
  const double host_need = double(3 * p.q_elems() + 2 * p.kv_elems()) * 4 + double(p.lse_elems()) * 12;
  if (host_need > double(host_memory_bytes()))
    return "the problem's tensors need " + format_bytes(host_need) + " of host memory; this machine has " +
           format_bytes(double(host_memory_bytes()));
  if (s.validate) return s.validate(p, o);
  return "";
}

}  // namespace

// Edits (insert, delete, replace, swap two neighbours) between two words: how far a typo is.
static size_t typo_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

// The option of --help's a mistyped one most likely meant ("" if none is close): --varaint, --variant.
static std::string meant_option(const CLI::App& app, const std::string& typed) {
  const std::string word = typed.substr(0, typed.find('='));
  std::string best;
  size_t best_d = std::max<size_t>(1, word.size() / 4) + 1;  // 2 edits for most names, fewer for short ones
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->get_group().empty()) continue;  // not this section's (hidden from --help)
    for (const std::string& name : opt->get_lnames()) {
      const size_t dist = typo_distance(word, "--" + name);
      if (dist < best_d) best_d = dist, best = "--" + name;
    }
  }
  return best;
}

// The words CLI11 could not place, in the order they were typed (it lists them backwards), and
// the likely slip: an unknown --option (and the one it likely meant), or an option written with one dash.
static std::string unexpected_arguments(const CLI::App& app, int argc, const char* const* argv,
                                        std::vector<std::string> extra) {
  std::string typed, unknown, one_dash;
  for (int i = 1; i < argc; ++i) {
    const auto it = std::find(extra.begin(), extra.end(), std::string(argv[i]));
    if (it == extra.end()) continue;
    extra.erase(it);
    const std::string word = argv[i];
    typed += (typed.empty() ? "" : " ") + word;
    if (word.rfind("--", 0) == 0 && unknown.empty()) unknown = word;
    if (word.size() > 1 && word[0] == '-' && word[1] != '-' && !std::isdigit(static_cast<unsigned char>(word[1])) &&
        one_dash.empty())
      one_dash = word;
  }
  if (!unknown.empty()) {
    const std::string meant = meant_option(app, unknown);
    return "unknown option " + unknown + (meant.empty() ? " (see --help)" : " (did you mean " + meant + "? see --help)");
  }
  return "unexpected argument" + std::string(typed.find(' ') == std::string::npos ? "" : "s") + ": " + typed +
         (one_dash.empty() ? " (see --help)" : " (options take two dashes: -" + one_dash + ")");
}

// CLI11 takes the word after an option as its value even when it is another option: "--t --cpu"
// would be refused as a T of '--cpu', and "--json --cpu" would write a file named --cpu and run on
// the GPU. An option that takes a value, followed by another option or by nothing, is refused by
// its own name instead. Returns "" when every such option has its value.
static std::string missing_value(const CLI::App& app, int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word.rfind("--", 0) != 0 || word.find('=') != std::string::npos) continue;
    const CLI::Option* opt = app.get_option_no_throw(word);
    if (opt == nullptr || opt->get_expected_max() == 0) continue;  // unknown (said later), or a flag
    if (i + 1 == argc || std::string(argv[i + 1]).rfind("--", 0) == 0) return word + " needs a value (see --help)";
    ++i;
  }
  return "";
}

// A plain decimal integer ("-12", "99999999999"): the only text CLI11 refuses for its size alone.
static bool decimal_integer(const std::string& text) {
  const size_t start = !text.empty() && (text[0] == '-' || text[0] == '+') ? 1 : 0;
  return text.size() > start && text.find_first_not_of("0123456789", start) == std::string::npos;
}

// The option a refused value was given to, as typed: CLI11 names no option it hides from --help
// (a section's inapplicable options), so the word before the value, or before "=value", names it.
static std::string option_of_value(int argc, const char* const* argv, const std::string& value) {
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word.rfind("--", 0) != 0) continue;
    const size_t eq = word.find('=');
    if (eq != std::string::npos && word.substr(eq + 1) == value) return word.substr(0, eq);
    if (eq == std::string::npos && i + 1 < argc && value == argv[i + 1]) return word;
  }
  return "";
}

void add_seed_option(CLI::App& app, int64_t& seed, const std::string& help) {
  // CLI11 silently clamps a 64-bit value that does not fit: such a seed is refused instead.
  const CLI::Validator seed_fits(
      [](std::string& text) -> std::string {
        if (!decimal_integer(text)) return "";  // CLI11 refuses it, or reads it
        errno = 0;
        std::strtoll(text.c_str(), nullptr, 10);
        return errno == ERANGE ? text + " is out of range (0 to " + std::to_string(INT64_MAX) + ")" : "";
      },
      "");
  app.add_option("--seed", seed, help)->capture_default_str()->check(seed_fits);
}

std::string seed_problem(int64_t seed) {
  return seed < 0 ? "--seed must be >= 0 (got " + std::to_string(seed) + ")" : "";
}

// An integer too large for its option: CLI11 says only "could not convert", the student needs the
// limit. 64-bit integers never get here (CLI11 clamps them: --seed has its own check), so a signed
// option that refused a whole number is an int, an unsigned one an unsigned int.
static std::string out_of_range(const CLI::Option* opt, const std::string& value) {
  const bool is_unsigned = opt != nullptr && opt->get_type_name().rfind("UINT", 0) == 0;
  if (value[0] == '-')
    return value + " is out of range (at least " + (is_unsigned ? "0" : std::to_string(INT_MIN)) + ")";
  return value + " is out of range (at most " + (is_unsigned ? std::to_string(UINT_MAX) : std::to_string(INT_MAX)) + ")";
}

int parse_command_line(CLI::App& app, int argc, const char* const* argv, std::string* message) {
  if (app.get_name().empty() && argc > 0) app.name(argv[0]);  // "Usage: build/bin/01_naive [OPTIONS]"
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {  // anywhere, even after "--t"
      std::cout << app.help();
      return -1;
    }
  if (std::string why = missing_value(app, argc, argv); !why.empty()) {
    *message = why;
    return kExitBadInput;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ExtrasError&) {
    *message = unexpected_arguments(app, argc, argv, app.remaining());
    return kExitBadInput;
  } catch (const CLI::ConversionError& e) {  // CLI11: "Could not convert: --t = abc"
    const std::string what = e.what(), key = "Could not convert: ";
    const size_t eq = what.find(" = ");
    if (what.rfind(key, 0) != 0 || eq == std::string::npos) {
      *message = what;
      return kExitBadInput;
    }
    std::string name = what.substr(key.size(), eq - key.size());
    const std::string value = what.substr(eq + 3);
    if (name.empty()) name = option_of_value(argc, argv, value);
    *message = name + ": " +
               (decimal_integer(value) ? out_of_range(app.get_option_no_throw(name), value)
                                       : "'" + value + "' is not a value it takes (see --help)");
    return kExitBadInput;
  } catch (const CLI::ArgumentMismatch& e) {  // CLI11: "--t: At Most 1 required but received 2"
    const std::string what = e.what();
    const size_t colon = what.find(':');
    *message = colon != std::string::npos && what.find("At Most 1") != std::string::npos
                   ? what.substr(0, colon) + " is given more than once"
                   : what;
    return kExitBadInput;
  } catch (const CLI::ParseError& e) {
    *message = e.what();
    return kExitBadInput;
  }
  return kExitPass;
}

int parse_options(int argc, const char* const* argv, const Section& s, Options* out, std::string* message) {
  Options o;
  o.problem = s.default_problem;
  o.variant = s.variants.empty() ? "" : s.variants.front();
  Problem& p = o.problem;
  std::string dtype = dtype_name(p.dtype), check = "auto";
  std::string kv_lens = s.ragged_kv_default ? "random" : "full";
  int t_kv = -1, h_kv = -1, window = 0;

  CLI::App app{s.name + ": " + s.title};
  app.set_help_flag("--help,-h", "Print this help and exit");
  app.get_formatter()->column_width(28);
  app.add_option("--b", p.b, "Batch size (sequences)")->capture_default_str();
  app.add_option("--h", p.h, "Query heads")->capture_default_str();
  // --help states the real defaults: a section whose default problem has its own K/V heads or keys
  // (decode: 8 K/V heads, a 4096-key cache) keeps them unless --h / --t is given.
  const Problem& d = s.default_problem;
  const bool own_t_kv = d.t_kv != d.t_q, own_h_kv = d.h_kv != d.h;
  app.add_option("--h-kv", h_kv, "K/V heads (GQA when < H); default " +
                 (own_h_kv ? std::to_string(d.h_kv) + " (H when --h is given)" : std::string("H")));
  app.add_option("--t", p.t_q, "Query rows per sequence (T_q)")->capture_default_str();
  app.add_option("--t-kv", t_kv, "Keys per sequence (T_kv); default " +
                 (own_t_kv ? std::to_string(d.t_kv) + " (T when --t is given)" : std::string("T")));
  std::string dims;  // the section's own, as for --dtype below
  for (int hd : s.head_dims) dims += (dims.empty() ? "" : ", ") + std::to_string(hd);
  app.add_option("--d", p.d, "Head dimension: " + dims)->capture_default_str();
  std::string dtypes;  // the section's own: --help lists no type that validate() refuses
  for (DType t : s.dtypes) dtypes += (dtypes.empty() ? "" : ", ") + std::string(dtype_name(t));
  app.add_option("--dtype", dtype, "Element type: " + dtypes)->capture_default_str();
  app.add_flag("--causal", p.causal, "Causal mask (bottom-right aligned when T_q != T_kv)");
  // Options a section does not have are still parsed (and refused by validate with one message,
  // whatever their value), but left out of its --help.
  auto only_if = [](CLI::Option* opt, bool applies) {
    if (!applies) opt->group("");
    return opt;
  };
  only_if(app.add_option("--window", window, "Sliding window W (needs --causal)"), s.supports_window);
  only_if(app.add_option("--page-size", p.page_size, "Paged KV block size (multiple of 16)")
              ->default_str(d.page_size > 0 ? std::to_string(d.page_size) : ""), s.paged);
  only_if(app.add_option("--kv-lens", kv_lens, "Keys per sequence: full (T_kv each) or random (seeded, in [1, T_kv])")
              ->capture_default_str(), s.supports_ragged_kv);
  app.add_option("--variant", o.variant, "Variant: " + join(s.variants))->capture_default_str();
  app.add_option("--bug", o.bug, s.bugs.empty() ? std::string("Inject a pitfall (none in this section)")
                                                 : "Inject a pitfall: " + join(s.bugs));
  int64_t seed = int64_t(o.seed);
  add_seed_option(app, seed, "Input seed (>= 0)");
  only_if(app.add_option("--splits", o.splits, "K/V splits (0: chosen from the shape and SM count)")
              ->capture_default_str(), s.has_splits);
  only_if(app.add_option("--consumers", o.consumers,
                         s.consumer_counts.empty() ? std::string("Consumer warpgroups per block")
                                                   : "Consumer warpgroups per block: " + join(s.consumer_counts) +
                                                         " (default " +
                                                         (s.consumer_default.empty() ? std::to_string(s.consumer_counts.back())
                                                                                     : s.consumer_default) + ")"),
          !s.consumer_counts.empty());
  only_if(app.add_option("--kv-tile", o.kv_tile,
                         s.kv_tiles.empty() ? std::string("Keys per K/V tile")
                                            : "Keys per K/V tile: " + join(s.kv_tiles) + " (default " + s.kv_tile_default + ")"),
          !s.kv_tiles.empty());
  app.add_option("--magnitude", o.magnitude, "Scale of Q and K entries (large: overflow stress)")->capture_default_str();
  app.add_option("--warmup", o.warmup, "Untimed runs before timing")->capture_default_str();
  app.add_option("--iters", o.iters, "Timed runs (0: no timing)")->capture_default_str();
  app.add_flag("--flush-l2", o.flush_l2, "Flush the L2 cache before every timed run");
  app.add_option("--check", check, "Self-check: auto, full, sample, none")->capture_default_str();
  app.add_option("--sample-rows", o.sample_rows, "Rows checked in sample mode (at most; a row drawn twice is checked once)")->capture_default_str();
  app.add_option("--smem-limit", o.smem_limit_kb,
                 "Behave as on a GPU that allows this many KB of shared memory per block (e.g. 99, 163; 0: this GPU's)")
      ->capture_default_str();
  app.add_option("--json", o.json_path, "Append the result record to this JSON file");
  app.add_option("--dump", o.dump_dir, "Write inputs and outputs as .npy files to this folder");
  app.add_flag("--cpu", o.cpu, "Run the CPU model: the algorithm in plain C++ around your exercise code (not the kernel)");
  app.add_flag("--quiet", o.quiet, "Print only the verdict line (after a failure, the check's reason above it)");
  // Modes the section parses itself (06: --simulate), then examples that a test runs (with --cpu).
  std::string footer;
  if (!s.extra_help.empty()) {
    footer += "Also:\n";
    for (const auto& [flag, help] : s.extra_help) footer += "  " + flag + "  " + help + "\n";
    footer += "\n";
  }
  const std::string program = "build/bin/" + std::string(s.build == "lab" ? "lab_" : "") + s.name;
  footer += "Examples:\n  " + program + "    # the defaults above, on the GPU\n  " + program +
            (own_t_kv ? " --cpu --t-kv 1000 --quiet" : " --cpu --t 100 --quiet") +  // decode keeps its one query row
            "    # the CPU model of the algorithm, no GPU needed\n";
  app.footer(footer);
  if (const int code = parse_command_line(app, argc, argv, message); code != kExitPass) return code;
  for (const CLI::Option* opt : app.get_options())
    if (opt->count() > 0 && !opt->get_lnames().empty()) o.given.push_back("--" + opt->get_lnames().front());
  if (std::string bad = seed_problem(seed); !bad.empty()) {
    *message = bad;
    return kExitBadInput;
  }
  o.seed = uint64_t(seed);
  // Without --t-kv / --h-kv: T_kv = T and H_kv = H, except where the section's default problem has
  // its own (decode: one query against a 4096-key cache) and T / H were left at their defaults.
  p.t_kv = t_kv >= 0 ? t_kv : own_t_kv && p.t_q == d.t_q ? d.t_kv : p.t_q;
  p.h_kv = h_kv >= 0 ? h_kv : own_h_kv && p.h == d.h ? d.h_kv : p.h;
  if (s.supports_window && o.given_option("--window") && window < 1) {
    *message = "--window must be >= 1 (got " + std::to_string(window) + ")";
    return kExitBadInput;
  }
  p.window = window;
  if (!parse_dtype(dtype, &p.dtype)) {
    *message = "unknown dtype '" + dtype + "' (fp32, fp16, bf16)";
    return kExitBadInput;
  }
  if (s.supports_ragged_kv && kv_lens != "full" && kv_lens != "random") {
    *message = "unknown --kv-lens '" + kv_lens + "' (full, random)";
    return kExitBadInput;
  }
  o.ragged_kv = kv_lens == "random";
  if (o.consumers != 0 &&
      std::find(s.consumer_counts.begin(), s.consumer_counts.end(), o.consumers) == s.consumer_counts.end()) {
    *message = "--consumers " + std::to_string(o.consumers) + " is not supported (" + join(s.consumer_counts) + ")";
    return kExitBadInput;
  }
  if (o.kv_tile != 0 && !s.kv_tiles.empty() &&  // (a section without the option refuses it in validate)
      std::find(s.kv_tiles.begin(), s.kv_tiles.end(), o.kv_tile) == s.kv_tiles.end()) {
    *message = "--kv-tile " + std::to_string(o.kv_tile) + " is not supported (" + join(s.kv_tiles) + ")";
    return kExitBadInput;
  }
  if (!parse_check_mode(check, &o.check)) {
    *message = "unknown --check mode '" + check + "' (auto, full, sample, none)";
    return kExitBadInput;
  }
  if (std::string m = validate(p, o, s); !m.empty()) {
    *message = m;
    return kExitBadInput;
  }
  if (o.ragged_kv) o.problem.kv_len = make_kv_lengths(p.b, p.t_kv, o.seed);
  forced_shared_memory_limit = o.smem_limit_kb * 1024;
  *out = o;
  return kExitPass;
}

namespace {

json problem_json(const Problem& p) {
  json j = {{"b", p.b}, {"h", p.h}, {"h_kv", p.h_kv}, {"t_q", p.t_q}, {"t_kv", p.t_kv}, {"d", p.d},
            {"dtype", dtype_name(p.dtype)}, {"causal", p.causal},
            {"window", p.window > 0 ? json(p.window) : json(nullptr)},
            {"page_size", p.page_size > 0 ? json(p.page_size) : json(nullptr)}};
  if (!p.kv_len.empty()) j["kv_len"] = p.kv_len;
  return j;
}

json finite_or_null(double x) { return std::isfinite(x) ? json(x) : json(nullptr); }

json check_json(const CheckResult& c) {
  return {{"passed", c.passed}, {"max_abs_err", finite_or_null(c.max_abs_err)},
          {"rel_l2_err", finite_or_null(c.rel_l2_err)}, {"ref_err_bound", finite_or_null(c.ref_err_bound)},
          {"lse_max_abs_err", finite_or_null(c.lse_max_abs_err)}, {"lse_err_bound", finite_or_null(c.lse_err_bound)},
          {"rule", c.rule}, {"rows_checked", c.rows_checked}, {"unwritten", c.o_unwritten + c.lse_unwritten},
          {"verdict", c.verdict}};
}

bool dump_npy(const std::string& dir, const Problem& p, const HostInputs& in, const std::vector<float>& o,
              const std::vector<float>& lse, const Options& opt, const std::string& section) {
  std::error_code ec;
  std::filesystem::create_directory(dir, ec);  // its parent was checked before the run
  if (ec && !std::filesystem::is_directory(dir)) {
    std::fprintf(stderr, "error: --dump: cannot create %s: %s\n", dir.c_str(), ec.message().c_str());
    return false;
  }
  const std::vector<int64_t> qs = {p.b, p.t_q, p.h, p.d}, ks = {p.b, p.t_kv, p.h_kv, p.d};
  bool ok = write_npy(dir + "/q.npy", in.q, qs) && write_npy(dir + "/k.npy", in.k, ks) &&
            write_npy(dir + "/v.npy", in.v, ks) && write_npy(dir + "/o.npy", o, qs);
  if (!lse.empty()) ok = ok && write_npy(dir + "/lse.npy", lse, {p.b, p.h, p.t_q});
  if (!p.kv_len.empty()) ok = ok && write_npy(dir + "/kv_len.npy", std::vector<int32_t>(p.kv_len.begin(), p.kv_len.end()), {p.b});
  json meta = {{"section", section}, {"variant", opt.variant}, {"problem", problem_json(p)},
               {"softmax_scale", p.softmax_scale()}, {"seed", opt.seed},
               {"layout", {{"q", "[B, T_q, H, D]"}, {"k", "[B, T_kv, H_kv, D]"}, {"v", "[B, T_kv, H_kv, D]"},
                           {"o", "[B, T_q, H, D]"}, {"lse", "[B, H, T_q], natural log"}}},
               {"note", "values stored as float32; they are exact values of the problem's dtype. "
                        "Unwritten output elements are NaN (all-ones bits)."}};
  std::ofstream meta_file(dir + "/meta.json");
  meta_file << meta.dump(1) << "\n";
  ok = ok && bool(meta_file);
  if (!ok) std::fprintf(stderr, "error: --dump: could not write every file to %s\n", dir.c_str());
  return ok;
}

// " (S and P: 17.2 GB)" where the run needs a workspace; "" where it needs none, not a "0 B" item.
std::string workspace_part(const std::string& what, const char* sep, int64_t bytes) {
  return bytes > 0 ? " (" + what + sep + format_bytes(double(bytes)) + ")" : "";
}

}  // namespace

int check_resources(const std::string& section, const Problem& p, bool cpu, bool needs_sm90a,
                    const std::string& gpu_only, double host_bytes, double device_bytes,
                    const std::string& workspace_what, int64_t workspace, DeviceInfo* dev) {
  if (cpu && !gpu_only.empty()) {
    std::printf("not checked here: needs a GPU: %s\n", gpu_only.c_str());
    return kExitCannotRun;
  }
  if (cpu) {
    if (host_bytes > 0.8 * double(host_memory_bytes())) {
      std::fprintf(stderr, "bad input: the CPU model needs %s%s but this machine has %s of memory\n",
                   format_bytes(host_bytes).c_str(), workspace_part(workspace_what, " ", workspace).c_str(),
                   format_bytes(double(host_memory_bytes())).c_str());
      return kExitBadInput;
    }
    return kExitPass;
  }
  std::string why;
  if (!query_device(dev, &why)) {
    if (gpu_only.empty())
      std::fprintf(stderr, "cannot run here: %s; add --cpu to run the CPU model of %s instead\n", why.c_str(),
                   section.c_str());
    else  // --cpu would only say "needs a GPU"
      std::fprintf(stderr, "cannot run here: %s, and only a GPU runs this: %s\n", why.c_str(), gpu_only.c_str());
    return kExitCannotRun;
  }
  if (needs_sm90a && !(dev->cc_major == 9 && dev->cc_minor == 0)) {
    std::fprintf(stderr, "cannot run here: %s needs a Hopper GPU (sm_90a); this is %s (sm_%d%d)\n", section.c_str(),
                 dev->name.c_str(), dev->cc_major, dev->cc_minor);
    return kExitCannotRun;
  }
  if (device_bytes > 0.95 * double(dev->free_bytes)) {
    std::fprintf(stderr, "bad input: %s needs %s of device memory%s but %s has %s free\n", p.describe().c_str(),
                 format_bytes(device_bytes).c_str(), workspace_part(workspace_what, ": ", workspace).c_str(),
                 dev->name.c_str(), format_bytes(double(dev->free_bytes)).c_str());
    return kExitBadInput;
  }
  return kExitPass;
}

HostInputs make_run_inputs(const Problem& p, const Options& opt, std::chrono::milliseconds first, std::FILE* out) {
  const std::string size = format_bytes(4.0 * double(p.q_elems() + 2 * p.kv_elems()));
  const SlowRunNotice notice(!opt.quiet, "making the inputs",
                             "Q, K and V: " + size + " in fp32; a smaller shape starts sooner", first,
                             std::chrono::seconds(10), out);
  return make_inputs(p, opt.seed, opt.magnitude);
}

int run_section(int argc, char** argv, const Section& s) {
  Options opt;
  std::string why;
  const int parsed = parse_options(argc, argv, s, &opt, &why);
  if (parsed == -1) return kExitPass;
  if (parsed != kExitPass) {
    std::fprintf(stderr, "bad input: %s\n", why.c_str());
    return kExitBadInput;
  }
  const Problem& p = opt.problem;
  const std::string build = opt.cpu ? "cpu-model" : (s.build.empty() ? "solution" : s.build);
  const int64_t workspace = s.workspace_bytes ? s.workspace_bytes(p, opt.variant) : 0;
  const auto named = s.workspace_what_of_variant.find(opt.variant);
  const std::string workspace_what = named != s.workspace_what_of_variant.end() ? named->second : s.workspace_what;

  DeviceInfo dev;
  if (opt.cpu && !s.cpu) {
    std::fprintf(stderr, "cannot run here: %s has no CPU model\n", s.name.c_str());
    return kExitCannotRun;
  }
  if (const int code = check_resources(s.name, p, opt.cpu, s.needs_sm90a, s.gpu_only ? s.gpu_only(opt) : "",
                                       double(fused_hbm_bytes(p)) + double(workspace),
                                       double(fused_hbm_bytes(p)) + double(workspace) + double(p.b) * 4,
                                       workspace_what, workspace, &dev);
      code != kExitPass)
    return code;

  const HostInputs in = make_run_inputs(p, opt);
  std::vector<float> o(size_t(p.q_elems()), poison_float());
  std::vector<float> lse(s.writes_lse ? size_t(p.lse_elems()) : 0, poison_float());
  Timing timing;
  int64_t extra_bytes = 0, hbm_bytes = fused_hbm_bytes(p);
  json metrics = json::object();
  std::string run_failure;  // wrong beyond the output (GpuRun::after_check_run, CpuRun::failure)
  std::string gpu_only_rest;  // CpuRun::gpu_only_rest
  const std::string refused = s.precheck ? s.precheck(p, opt) : "";  // nothing runs (Section::precheck)

  if (!refused.empty()) {
    run_failure = refused;
  } else if (opt.cpu) {
    std::vector<float> lse_buf(size_t(p.lse_elems()), poison_float());
    const CpuRun run = [&] {
      const SlowRunNotice notice(!opt.quiet, "the CPU model", cpu_model_hint(p));
      return s.cpu(p, opt, in, o, lse_buf);
    }();
    if (!run.not_checked.empty()) {  // no model ran (08's stub: only a host check): no banner
      std::printf("not checked here: %s\n", run.not_checked.c_str());
      return kExitCannotRun;
    }
    if (!opt.quiet)
      std::printf("== CPU model of %s: the algorithm in plain C++ around %s exercise code (the kernel runs only "
                  "on a GPU) ==\n",
                  s.name.c_str(), s.build == "lab" ? "your" : "the solution's");
    if (!opt.quiet) std::fputs(run.header.c_str(), stdout);
    if (s.writes_lse) lse = std::move(lse_buf);
    extra_bytes = run.extra_host_bytes;
    if (run.hbm_bytes_model >= 0) hbm_bytes = run.hbm_bytes_model;
    metrics = run.metrics;
    run_failure = run.failure;
    gpu_only_rest = run.gpu_only_rest;
  } else {
    DeviceBuffer q = upload(in.q, p.dtype), k = upload(in.k, p.dtype), v = upload(in.v, p.dtype);
    DeviceBuffer o_dev(size_t(p.q_elems()) * size_t(dtype_bytes(p.dtype)));
    DeviceBuffer lse_dev(size_t(p.lse_elems()) * 4);
    DeviceBuffer kv_len_dev(p.kv_len.size() * 4);
    if (!p.kv_len.empty())
      CUDA_CHECK(cudaMemcpy(kv_len_dev.get(), p.kv_len.data(), kv_len_dev.bytes(), cudaMemcpyHostToDevice));
    const RunContext ctx{p, opt.variant, opt.bug, dev,
                         DeviceTensors{q.get(), k.get(), v.get(), o_dev.get(), lse_dev.as<float>(),
                                       p.kv_len.empty() ? nullptr : kv_len_dev.as<int>()},
                         in, opt};
    const GpuRun run = s.gpu(ctx);
    extra_bytes = run.extra_device_bytes;
    if (run.hbm_bytes_model >= 0) hbm_bytes = run.hbm_bytes_model;
    metrics = run.metrics;
    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreate(&stream));
    o_dev.poison(stream);
    lse_dev.poison(stream);
    run.forward(stream);
    CUDA_CHECK_LAST();
    CUDA_CHECK(cudaStreamSynchronize(stream));  // a fault inside the kernel surfaces here
    o = download(o_dev, p.q_elems(), p.dtype);
    if (s.writes_lse) lse = download(lse_dev, p.lse_elems(), DType::f32);
    if (run.after_check_run) run_failure = run.after_check_run(metrics);
    const bool recheck = run.graph_replay || run.carries_state;
    if (recheck) o_dev.poison(stream);  // the timed runs must write O again ...
    timing = time_forward(run.forward, opt.warmup, opt.iters, opt.flush_l2, dev, stream, run.graph_replay);
    CUDA_CHECK_LAST();
    if (recheck && timing.iters > 0 && run_failure.empty()) {  // ... the very O that was checked
      const std::vector<float> timed_o = download(o_dev, p.q_elems(), p.dtype);
      if (std::memcmp(timed_o.data(), o.data(), o.size() * sizeof(float)) != 0)
        run_failure = run.graph_replay
                          ? "the timed runs (launched, then replayed from a CUDA graph) left another O than the checked run"
                          : "the timed runs left another O than the checked run (the state the forward keeps between launches)";
    }
    CUDA_CHECK(cudaStreamDestroy(stream));
  }

  const std::vector<RowId> rows = rows_to_check(p, opt.check, opt.sample_rows, opt.seed);
  const bool fp8 = std::find(s.fp8_variants.begin(), s.fp8_variants.end(), opt.variant) != s.fp8_variants.end();
  CheckResult check = [&] {
    const SlowRunNotice notice(!opt.quiet, "the fp64 reference check", "--check sample checks fewer rows");
    return check_rows(p, in, rows, o, lse, fp8 ? RefKind::fp8_e4m3 : RefKind::same_precision);
  }();
  // Which rows the output's check read: said beside the output's verdict, not beside a run's own
  // reason (a protocol check, a refusal), which no row sample bears on.
  std::string scope = check_scope(opt.check, int64_t(rows.size()), int64_t(p.b) * p.h * p.t_q);
  if (!scope.empty()) scope = " (" + scope + ")";
  if (!refused.empty()) {  // nothing ran: the reason is the whole verdict (not "output not written")
    check.verdict = refused + " (nothing was run)";
    check.details.clear();
    scope.clear();
  } else if (!run_failure.empty()) {  // the output may be right; the run is not. Its own reason leads
    // (a cause: "the tile span is wrong"), the output's check follows (the symptom: O unwritten).
    if (!check.passed) check.details.insert(check.details.begin(), check.verdict + scope);
    check.verdict = run_failure;
    scope.clear();
  }
  if (!run_failure.empty()) check.passed = false;
  // A pitfall injected into a lab whose exercise is still the stub shows the stub's failure, the
  // same as without --bug: said, so the line is not read as the pitfall's symptom.
  if (!opt.bug.empty() && !check.passed && refused.empty() &&
      (check.o_unwritten > 0 || (check.lse_unwritten > 0 && check.o_nan == int64_t(rows.size()) * p.d)))
    check.details.insert(check.details.begin(), "--bug " + opt.bug + " shows nothing yet: O is as broken without it "
                                                "(an exercise still the stub?); run the same line without --bug until it passes");

  const double flops = attention_flops(p);
  const bool timed = timing.iters > 0 && timing.median_ms > 0;
  const double tflops = timed ? flops / (timing.median_ms * 1e-3) / 1e12 : NAN;
  const double gbps = timed ? double(hbm_bytes) / (timing.median_ms * 1e-3) / 1e9 : NAN;

  if (!opt.quiet) {
    std::printf("%s [%s] %s   %s%s\n", s.name.c_str(), opt.variant.c_str(), build.c_str(), p.describe().c_str(),
                opt.bug.empty() ? "" : ("   --bug " + opt.bug).c_str());
    if (!opt.cpu) std::printf("  gpu      %s (sm_%d%d, %d SMs)\n", dev.name.c_str(), dev.cc_major, dev.cc_minor, dev.sms);
    std::printf("  check    %s%s\n", check.verdict.c_str(), scope.c_str());
    for (const auto& d : check.details) std::printf("           %s\n", d.c_str());
    if (timed) {
      std::printf("  time     %.4g ms median of %d (min %.4g, max %.4g)", timing.median_ms, timing.iters, timing.min_ms,
                  timing.max_ms);
      if (timing.graph_median_ms >= 0)
        std::printf("  (%s; eager %.4g ms, graph %.4g ms)", timing.method.c_str(), timing.eager_median_ms,
                    timing.graph_median_ms);
      std::printf("\n  rate     %.3g TFLOP/s, %.4g GB/s of modelled HBM traffic (%s)\n", tflops, gbps,
                  format_bytes(double(hbm_bytes)).c_str());
    }
    // workspace_what names what a section's variants may add; a run that adds none says so rather
    // than "0 B partial O and LSE of the splits".
    if (extra_bytes > 0)
      std::printf("  memory   %s %s, on top of Q, K, V, O's %s\n", format_bytes(double(extra_bytes)).c_str(),
                  workspace_what.c_str(), format_bytes(double(fused_hbm_bytes(p))).c_str());
    else
      std::printf("  memory   nothing on top of Q, K, V, O's %s\n", format_bytes(double(fused_hbm_bytes(p))).c_str());
  }
  if (check.passed && !gpu_only_rest.empty()) {  // the host's part passed; the rest needs a GPU
    // said apart from a run that checked nothing (scripts/lab check: "cpu-ok", not "needs-gpu")
    std::printf("CPU part passed: %s %s (CPU model)\n", s.name.c_str(), opt.variant.c_str());
    std::printf("not checked here: %s\n", gpu_only_rest.c_str());
    return kExitCannotRun;
  }
  print_verdict(check.passed, check.verdict, check.details, opt.quiet, s.name, opt.variant, opt.cpu);

  if (!opt.json_path.empty()) {
    const char* sha = std::getenv("LAB_GIT_SHA");
    metrics["tflops"] = finite_or_null(tflops);
    metrics["hbm_gbps"] = finite_or_null(gbps);
    metrics["hbm_bytes_model"] = hbm_bytes;
    metrics["extra_device_bytes"] = extra_bytes;
    metrics["flops_model"] = flops;
    json gpu = gpu_json(dev, opt.cpu);
    json record = {{"schema_version", kSchemaVersion}, {"section", s.name}, {"variant", opt.variant},
                   {"build", build}, {"git_sha", sha && *sha ? sha : LAB_GIT_SHA_DEFAULT},
                   {"time_utc", utc_now()}, {"gpu", gpu}, {"problem", problem_json(p)},
                   {"check", check_json(check)},
                   {"timing", timing_json(timing, timed)},
                   {"metrics", metrics}, {"command", command_line(argc, argv) + s.own_options}};
    if (timed && timing.graph_median_ms >= 0) {  // as scripts/baselines.py records SDPA's
      record["timing"]["eager_median_ms"] = timing.eager_median_ms;
      record["timing"]["graph_median_ms"] = timing.graph_median_ms;
    }
    if (!opt.bug.empty()) record["bug"] = opt.bug;
    if (std::string bad = validate_record(record); !bad.empty()) {
      std::fprintf(stderr, "internal error: record fails its schema: %s\n", bad.c_str());
      return kExitFail;
    }
    std::string err;
    if (!append_record(opt.json_path, record, &err)) {  // checked before the run: changed since
      std::fprintf(stderr, "error: --json: %s\n", err.c_str());
      return kExitFail;
    }
  }
  if (!opt.dump_dir.empty() && !dump_npy(opt.dump_dir, p, in, o, lse, opt, s.name)) return kExitFail;
  return check.passed ? kExitPass : kExitFail;
}

}  // namespace lab
