// The experiments of `bahdanau experiment` on settings far smaller than --quick (a few dozen
// optimizer steps on tiny models), so the whole file runs in seconds: the tables have the
// expected rows and columns, metrics are finite and in [0, 1], the files are written and
// well-formed, the same seed gives the same table, and bad options give clear errors.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "../../autograd/error_of.h"
#include "autograd/ops_elementwise.h"
#include "autograd/ops_reduce.h"
#include "models/experiments/experiments.h"

namespace fs = std::filesystem;
using namespace tg::models;

namespace {

fs::path scratch(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("tg_experiments_" + std::to_string(::getpid())) / name;
  fs::remove_all(p);
  return p;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::size_t count_lines(const std::string& s) {
  std::size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

bool have(const char* cmd) { return std::system((std::string("command -v ") + cmd + " >/dev/null 2>&1").c_str()) == 0; }

/// Far below --quick: seconds for the whole file.
ExperimentOptions tiny(const fs::path& out) {
  ExperimentOptions o;
  o.quick = true;
  o.out_dir = out.string();
  o.seed = 3;
  o.steps = 12;
  o.batch_size = 16;
  o.embed_size = 8;
  o.num_hiddens = 8;
  o.train_pairs = 64;
  o.test_pairs = 30;
  o.rounds = 1;
  return o;
}

/// Every cell of the named columns parses as a number in [0, 1].
void expect_unit_metrics(const ExperimentTable& t, const std::vector<std::string>& columns) {
  for (const auto& c : columns) {
    const std::size_t k = t.column(c);
    for (const auto& row : t.rows) {
      ASSERT_EQ(row.size(), t.columns.size());
      if (row[k].empty() || row[k] == "n/a") continue;  // an empty length bucket, BLEU-4 without 4-grams
      const double v = std::stod(row[k]);
      EXPECT_TRUE(std::isfinite(v) && v >= 0.0 && v <= 1.0) << t.slug << " column " << c << ": " << row[k];
    }
  }
}

/// The SVG parses as XML (python3) and renders (rsvg-convert), when those exist.
void expect_valid_svg(const fs::path& svg) {
  ASSERT_TRUE(fs::exists(svg)) << svg;
  if (have("/usr/bin/python3")) {
    const std::string cmd = "/usr/bin/python3 -c \"import sys,xml.etree.ElementTree as E; E.parse(sys.argv[1])\" " + svg.string();
    EXPECT_EQ(std::system(cmd.c_str()), 0) << "not well-formed XML: " << svg;
  }
  if (have("rsvg-convert")) {
    const std::string cmd = "rsvg-convert -o " + svg.string() + ".png " + svg.string();
    EXPECT_EQ(std::system(cmd.c_str()), 0) << svg;
  }
}

/// NAME.md, and SLUG.csv (header + one line per row) and SLUG.svg for every table.
void expect_files(const ExperimentResult& r, const fs::path& dir) {
  const std::string md = read_file(dir / (r.name + ".md"));
  EXPECT_NE(md.find("# Experiment " + r.name), std::string::npos);
  EXPECT_EQ(md, r.markdown());
  for (const auto& t : r.tables) {
    const std::string csv = read_file(dir / (t.slug + ".csv"));
    EXPECT_EQ(csv, t.csv());
    EXPECT_EQ(count_lines(csv), t.rows.size() + 1) << t.slug;
    EXPECT_NE(md.find(t.markdown()), std::string::npos);
    expect_valid_svg(dir / (t.slug + ".svg"));
  }
}

}  // namespace

TEST(Experiments, LengthStudyBucketsHeldOutPairsBySourceLength) {
  const fs::path dir = scratch("length");
  ExperimentOptions o = tiny(dir);
  o.max_len = 10;  // buckets 1–2, 3–4, 5–6, 7–8, 9–10
  const ExperimentResult r = length_experiment(o);
  ASSERT_EQ(r.tables.size(), 1u);  // no data_file
  const ExperimentTable& t = r.tables[0];
  EXPECT_EQ(t.slug, "length_reverse");
  EXPECT_EQ(t.columns,
            (std::vector<std::string>{"source length", "pairs", "rnnsearch BLEU-4", "rnnencdec BLEU-4",
                                      "transformer BLEU-4", "rnnsearch exact", "rnnencdec exact", "transformer exact",
                                      "rnnsearch GeoMean", "rnnencdec GeoMean", "transformer GeoMean"}));
  ASSERT_EQ(t.rows.size(), 6u);
  EXPECT_EQ(t.rows[0][0], "1–2");
  EXPECT_EQ(t.rows[4][0], "9–10");
  EXPECT_EQ(t.rows[5][0], "all");
  std::int64_t bucketed = 0;
  for (std::size_t i = 0; i + 1 < t.rows.size(); ++i) bucketed += std::stoll(t.rows[i][1]);
  EXPECT_EQ(bucketed, 30);
  EXPECT_EQ(t.rows[5][1], "30");
  EXPECT_EQ(t.rows[0][2], "n/a");  // references of 1-2 tokens have no 4-grams
  EXPECT_NE(t.rows[4][2], "n/a");
  expect_unit_metrics(t, {"rnnsearch BLEU-4", "rnnencdec BLEU-4", "transformer BLEU-4", "rnnsearch exact",
                          "rnnencdec exact", "transformer exact", "rnnsearch GeoMean", "rnnencdec GeoMean",
                          "transformer GeoMean"});
  EXPECT_NE(t.notes.find("12 steps × batch 16"), std::string::npos) << t.notes;
  EXPECT_GT(r.train_seconds, 0.0);
  EXPECT_GE(r.seconds, r.train_seconds);
  expect_files(r, dir);
  EXPECT_EQ(r.files.size(), 3u);
}

TEST(Experiments, LengthStudyOnASentenceFile) {
  const fs::path dir = scratch("length_file");
  fs::create_directories(dir);
  // A small fra.txt-like file: sentences of 1..6 words, one very long pair that must be skipped.
  const fs::path data = dir / "pairs.txt";
  {
    std::ofstream out(data);
    const char* words[] = {"go", "run", "stop", "wait", "see", "eat"};
    const char* mots[] = {"va", "cours", "arrête", "attends", "vois", "mange"};
    for (int i = 0; i < 120; ++i) {
      std::string en, fr;
      for (int k = 0; k <= i % 6; ++k) {
        en += std::string(k ? " " : "") + words[(i + k) % 6];
        fr += std::string(k ? " " : "") + mots[(i + k) % 6];
      }
      out << en << " .\t" << fr << " !\n";
    }
    out << "a b c d e f g h i j k l m n o p q r s t u v w x y z .\tx .\n";
  }
  ExperimentOptions o = tiny(dir / "out");
  o.max_len = 4;
  o.data_file = data.string();
  o.data_max_len = 8;
  o.train_pairs = 80;
  o.test_pairs = 30;
  const ExperimentResult r = length_experiment(o);
  ASSERT_EQ(r.tables.size(), 2u);
  const ExperimentTable& t = r.tables[1];
  EXPECT_EQ(t.slug, "length_data");
  EXPECT_NE(t.title.find("pairs.txt"), std::string::npos);
  EXPECT_EQ(t.rows.back()[1], "30");
  expect_unit_metrics(t, {"rnnsearch BLEU-4", "rnnencdec exact", "rnnsearch GeoMean"});
  expect_files(r, dir / "out");
  // Asking for more pairs than the file has is an error naming the file.
  o.train_pairs = 500;
  try {
    length_experiment(o);
    ADD_FAILURE() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("pairs.txt: only 120 pairs"), std::string::npos) << e.what();
  }
}

TEST(Experiments, AblationTableHasEveryVariantAtEveryLengthAndIsReproducible) {
  const fs::path dir = scratch("ablation");
  ExperimentOptions o = tiny(dir);
  o.max_lens = {4};
  o.rounds = 2;
  const ExperimentResult r = ablation_experiment(o);
  ASSERT_EQ(r.tables.size(), 1u);
  const ExperimentTable& t = r.tables[0];
  EXPECT_EQ(t.columns, (std::vector<std::string>{"max length", "variant", "rounds", "PSA", "LCSR", "GeoMean",
                                                 "GeoMean sd", "exact"}));
  ASSERT_EQ(t.rows.size(), 5u);
  const std::vector<std::string> variants = {"base", "zero_init", "state_only_output", "no_prev_token", "recurrence_only"};
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(t.rows[i][0], "4");
    EXPECT_EQ(t.rows[i][1], variants[i]);
    EXPECT_EQ(t.rows[i][2], "2");
    // GeoMean is the mean over rounds of sqrt(PSA·LCSR), so it cannot exceed max(PSA, LCSR).
    EXPECT_LE(std::stod(t.rows[i][5]), std::max(std::stod(t.rows[i][3]), std::stod(t.rows[i][4])) + 1e-3);
    EXPECT_GE(std::stod(t.rows[i][6]), 0.0);
  }
  expect_unit_metrics(t, {"PSA", "LCSR", "GeoMean", "exact"});
  expect_files(r, dir);
  // Per-round CSV: a header and 5 variants × 2 rounds, seeds 3 and 4.
  const std::string rounds = read_file(dir / "ablation_rounds.csv");
  EXPECT_EQ(count_lines(rounds), 11u);
  EXPECT_NE(rounds.find("4,no_prev_token,2,4,"), std::string::npos) << rounds;
  // The same options give the same table (training is deterministic).
  ExperimentOptions again = o;
  again.out_dir.clear();
  const ExperimentResult r2 = ablation_experiment(again);
  EXPECT_EQ(r2.tables[0].rows, t.rows);
  EXPECT_TRUE(r2.files.empty());
}

TEST(Experiments, PrimesQuickRunsTwoLengths) {
  const fs::path dir = scratch("primes");
  ExperimentOptions o = tiny(dir);
  const ExperimentResult r = primes_experiment(o);  // quick default lengths 5 and 10
  const ExperimentTable& t = r.tables[0];
  ASSERT_EQ(t.rows.size(), 10u);
  EXPECT_EQ(t.rows[0][0], "5");
  EXPECT_EQ(t.rows[9][0], "10");
  EXPECT_EQ(t.rows[9][1], "recurrence_only");
  EXPECT_NE(t.title.find("`primes`"), std::string::npos);
  expect_unit_metrics(t, {"PSA", "LCSR", "GeoMean", "exact"});
  expect_files(r, dir);
  const std::string svg = read_file(dir / "primes.svg");
  EXPECT_NE(svg.find("max length 10"), std::string::npos);
}

TEST(Experiments, ScoresComparesTheThreeScoreFunctionsAndTheTransformer) {
  const fs::path dir = scratch("scores");
  ExperimentOptions o = tiny(dir);
  const ExperimentResult r = scores_experiment(o);
  const ExperimentTable& t = r.tables[0];
  EXPECT_EQ(t.columns, (std::vector<std::string>{"attention", "rounds", "exact", "GeoMean", "BLEU-4", "tokens/s",
                                                 "tokens/CPU-s", "train s", "last loss"}));
  ASSERT_EQ(t.rows.size(), 4u);
  EXPECT_EQ(t.rows[0][0], "additive");
  EXPECT_EQ(t.rows[1][0], "scaled_dot");
  EXPECT_EQ(t.rows[2][0], "dot");
  EXPECT_EQ(t.rows[3][0], "transformer");
  EXPECT_NE(t.title.find("`dates`"), std::string::npos);
  expect_unit_metrics(t, {"exact", "GeoMean", "BLEU-4"});
  for (const auto& row : t.rows) {
    EXPECT_GT(std::stod(row[t.column("tokens/s")]), 0.0);
    EXPECT_GT(std::stod(row[t.column("tokens/CPU-s")]), 0.0);
    const double loss = std::stod(row[t.column("last loss")]);
    EXPECT_TRUE(std::isfinite(loss) && loss > 0) << row[t.column("last loss")];
  }
  expect_files(r, dir);
}

TEST(Experiments, EnoughTrainingSolvesAShortTask) {
  // Not only well-formed: 150 steps of rnnsearch learn `reverse` on lengths 1..4.
  ExperimentOptions o;
  o.quick = true;
  o.seed = 1;
  o.max_len = 4;
  o.steps = 150;
  o.train_pairs = 500;
  o.test_pairs = 50;
  o.task = "reverse";
  const ExperimentResult r = scores_experiment(o);
  const ExperimentTable& t = r.tables[0];
  EXPECT_GT(std::stod(t.rows[0][t.column("exact")]), 0.8) << t.markdown();
}

TEST(Experiments, BadOptionsGiveClearErrors) {
  auto message = [](const std::string& name, const ExperimentOptions& o) {
    return tg::testing::error_of<std::invalid_argument>([&] { run_experiment(name, o); });
  };
  ExperimentOptions o;
  o.quick = true;
  EXPECT_NE(message("nosuch", o).find("unknown experiment 'nosuch' (known: ablation, length, primes, scores)"),
            std::string::npos);
  ExperimentOptions bad = o;
  bad.steps = -5;
  EXPECT_NE(message("scores", bad).find("steps must be >= 0"), std::string::npos) << message("scores", bad);
  bad = o;
  bad.max_lens = {10, 0};
  EXPECT_NE(message("primes", bad).find("every maximum length must be >= 1, got 0"), std::string::npos);
  bad = o;
  bad.task = "chess";
  EXPECT_NE(message("ablation", bad).find("unknown task 'chess'"), std::string::npos);
  bad = o;
  bad.data_file = "/nonexistent/fra.txt";
  EXPECT_NE(message("length", bad).find("data file '/nonexistent/fra.txt' does not exist"), std::string::npos);
  bad = o;
  bad.task = "reverse";
  EXPECT_NE(message("primes", bad).find("runs on the primes task"), std::string::npos);
  bad = o;
  bad.threads = -1;
  EXPECT_NE(message("length", bad).find("threads must be >= 0"), std::string::npos);

  EXPECT_EQ(parse_length_list("10,60,110"), (std::vector<std::int64_t>{10, 60, 110}));
  EXPECT_THROW(parse_length_list("10,,60"), std::invalid_argument);
  EXPECT_THROW(parse_length_list("5,x"), std::invalid_argument);
  EXPECT_THROW(parse_length_list("0"), std::invalid_argument);
  EXPECT_THROW(parse_length_list(""), std::invalid_argument);
}

TEST(Experiments, GroupedBarChartHeightsFollowTheValues) {
  const std::string svg = grouped_bar_chart_svg({"a", "b"}, {{"g1", {0.5, 1.0}}, {"g2", {0.25, 0.0}}});
  std::regex bar(R"re(height="([^"]+)" fill="[^"]+" data-group="(\d)" data-series="(\d)" data-value="([^"]+)")re");
  int n = 0;
  double full = 0;
  std::vector<double> h(4), v(4);
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), bar); it != std::sregex_iterator(); ++it, ++n) {
    const int k = std::stoi((*it)[2]) * 2 + std::stoi((*it)[3]);
    h[k] = std::stod((*it)[1]);
    v[k] = std::stod((*it)[4]);
  }
  ASSERT_EQ(n, 4);
  full = h[1];  // value 1.0 = full plot height
  EXPECT_GT(full, 0);
  for (int k = 0; k < 4; ++k) EXPECT_NEAR(h[k], v[k] * full, 1e-3);
  EXPECT_THROW(grouped_bar_chart_svg({"a", "b"}, {{"g", {1.0}}}), std::invalid_argument);
  EXPECT_THROW(grouped_bar_chart_svg({}, {}), std::invalid_argument);
}

// ---- the CLI ---------------------------------------------------------------------------------

namespace {
const std::string kBinary = TG_BINARY_DIR "/bin/bahdanau";

struct CliRun {
  int status = -1;
  std::string out, err;
};

CliRun cli(const std::string& args, const fs::path& dir) {
  fs::create_directories(dir);
  const fs::path out = dir / "stdout.txt", err = dir / "stderr.txt";
  const int rc = std::system((kBinary + " " + args + " >" + out.string() + " 2>" + err.string()).c_str());
  return {.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, .out = read_file(out), .err = read_file(err)};
}
}  // namespace

TEST(ExperimentsCli, ExperimentSubcommandAndTranslateBars) {
  if (!fs::exists(kBinary)) GTEST_SKIP() << kBinary << " not built";
  const fs::path dir = scratch("cli");
  const std::string small = " --steps 8 --batch-size 16 --embed-size 8 --num-hiddens 8 --train-pairs 40 --test-pairs 12";
  CliRun r = cli("experiment scores --quick --quiet --seed 2 --out-dir " + (dir / "scores").string() + small, dir);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("# Experiment scores"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| scaled_dot | 1 |"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("took"), std::string::npos) << r.err;
  for (const char* f : {"scores.md", "scores.csv", "scores.svg"}) EXPECT_TRUE(fs::exists(dir / "scores" / f)) << f;

  // Malformed options: one line on stderr, status 2.
  r = cli("experiment nosuch --quick", dir);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("bahdanau: error:"), std::string::npos) << r.err;
  r = cli("experiment primes --quick --max-lens 5,x", dir);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--max-lens: expected a comma-separated list of positive lengths, got '5,x'"), std::string::npos)
      << r.err;
  r = cli("experiment ablation --quick --data " + kBinary, dir);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--data is only used by the length experiment"), std::string::npos) << r.err;
  r = cli("experiment scores --quick --steps -3", dir);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--steps"), std::string::npos) << r.err;

  // translate --bars from a tiny checkpoint.
  r = cli("train --task copy --model rnnsearch --num-examples 64 --steps 3 --batch-size 16 --embed-size 8 --num-hiddens 8 "
          "--quiet --out " + (dir / "ck").string(), dir);
  ASSERT_EQ(r.status, 0) << r.err;
  r = cli("translate --model " + (dir / "ck").string() + " --bars " + (dir / "bars.svg").string() + " 'a b c'", dir);
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string svg = read_file(dir / "bars.svg");
  EXPECT_NE(svg.find("class=\"step\""), std::string::npos);
  EXPECT_NE(svg.find(">&lt;eos&gt;</text>"), std::string::npos);  // the source's <eos> column label
  expect_valid_svg(dir / "bars.svg");
}
