// `mpirun -np 2 bahdanau train`: the same parameters as one process over the same shards, run to
// run, and across a resume at another number of ranks; only rank 0 writes. Run by ctest as a plain
// process (dist.cli.*): each test starts mpirun itself.
#include <gtest/gtest.h>

#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "../examples/child_process.h"
#include "autograd/tensor.h"
#include "nn/serialize.h"

namespace tg {
namespace {

namespace fs = std::filesystem;
using testing::ProgramRun;

const std::string kBinary = TG_BINARY_DIR "/bin/bahdanau";
// A small rnnsearch (additive attention: per-step decoder weights, used many times per backward)
// with dropout (per-shard streams) on the dates task: a few steps take well under a second.
const std::string kConfig =
    " --task dates --num-examples 200 --model rnnsearch --embed-size 16 --num-hiddens 16 --num-steps 12"
    " --dropout 0.1 --batch-size 16 --seed 3 --threads 1 --quiet --checkpoint-every 0";

fs::path dir() {
  static const fs::path d = testing::scratch_dir("tg_dist_cli");
  return d;
}

ProgramRun run(int ranks, const std::string& args) {
  const std::string launch = ranks == 0 ? kBinary
                                        : std::string(TG_MPIEXEC) + " " + TG_MPIEXEC_FLAGS + " -np " +
                                              std::to_string(ranks) + " " + kBinary;
  const ProgramRun r = testing::run_command(launch + " train" + kConfig + " " + args, dir());
  EXPECT_EQ(r.status, 0) << args << "\n" << r.err;
  return r;
}

/// The CSV rows without the elapsed_s column (step,epoch,loss,tokens,grad_norm,lr).
std::string rows_without_time(const fs::path& csv) {
  std::istringstream in(testing::read_file(csv));
  std::string line, out;
  while (std::getline(in, line)) out += line.substr(0, line.rfind(',')) + "\n";
  return out;
}

/// Every entry of two .npz files equal bit for bit (names, shapes, bytes).
void expect_same_npz(const fs::path& a, const fs::path& b) {
  const auto x = nn::load_npz(a.string()), y = nn::load_npz(b.string());
  ASSERT_EQ(x.size(), y.size()) << a << " vs " << b;
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(x[i].first, y[i].first);
    ASSERT_EQ(x[i].second.shape(), y[i].second.shape()) << x[i].first;
    ASSERT_EQ(x[i].second.dtype(), y[i].second.dtype()) << x[i].first;
    const std::size_t bytes = static_cast<std::size_t>(x[i].second.numel()) * (x[i].second.dtype() == DType::f32 ? 4 : 8);
    EXPECT_EQ(std::memcmp(x[i].second.data_ptr(), y[i].second.data_ptr(), bytes), 0)
        << x[i].first << " differs between " << a << " and " << b;
  }
}

void expect_same_run(const std::string& a, const std::string& b) {
  EXPECT_EQ(rows_without_time(dir() / (a + ".csv")), rows_without_time(dir() / (b + ".csv"))) << a << " vs " << b;
  expect_same_npz(dir() / a / "weights.npz", dir() / b / "weights.npz");
  expect_same_npz(dir() / a / "optimizer.npz", dir() / b / "optimizer.npz");
}

std::string out_args(const std::string& name) {
  return "--out " + (dir() / name).string() + " --log-csv " + (dir() / (name + ".csv")).string();
}

TEST(DistCli, TwoRanksEqualOneProcessOverTheSameShardsAndRunToRun) {
  run(0, "--steps 6 --shards 2 " + out_args("one"));
  const ProgramRun r = run(2, "--steps 6 " + out_args("two"));
  run(2, "--steps 6 " + out_args("two_again"));
  expect_same_run("one", "two");
  expect_same_run("two", "two_again");
  // Only rank 0 reports (and writes: the CSV rows are not doubled, compared above).
  std::size_t lines = 0;
  for (std::size_t p = r.err.find("trained to step 6"); p != std::string::npos; p = r.err.find("trained to step 6", p + 1))
    ++lines;
  EXPECT_EQ(lines, 1u) << r.err;
  EXPECT_NE(r.err.find("data parallel: 2 ranks, 2 shards per batch"), std::string::npos) << r.err;
}

TEST(DistCli, FourShardsGiveTheSameBitsOnOneTwoAndFourRanks) {
  run(0, "--steps 4 --shards 4 " + out_args("four_one"));
  run(2, "--steps 4 --shards 4 " + out_args("four_two"));
  run(4, "--steps 4 --shards 4 " + out_args("four_four"));
  expect_same_run("four_one", "four_two");
  expect_same_run("four_one", "four_four");
}

TEST(DistCli, CompactGradientsGiveTheSameBitsOnOneTwoAndFourRanks) {
  // --compact-grads: the embeddings' row-sparse gradients travel as rows between ranks.
  run(0, "--steps 4 --shards 4 --compact-grads " + out_args("compact_one"));
  const ProgramRun two = run(2, "--steps 4 --shards 4 --compact-grads " + out_args("compact_two"));
  run(4, "--steps 4 --shards 4 --compact-grads " + out_args("compact_four"));
  expect_same_run("compact_one", "compact_two");
  expect_same_run("compact_one", "compact_four");
  EXPECT_EQ(two.err.find("(0 bucket exchanges as rows)"), std::string::npos) << two.err;
  EXPECT_NE(two.err.find("bucket exchanges as rows)"), std::string::npos) << two.err;
}

TEST(DistCli, ResumeAtAnotherNumberOfRanksRepeatsTheStraightRun) {
  run(2, "--steps 6 " + out_args("straight"));
  // 3 steps on 2 ranks, then 3 more in one process (the checkpoint's 2 shards are kept).
  run(2, "--steps 3 " + out_args("half"));
  run(0, "--init-from " + (dir() / "half").string() + " --steps 6 --log-csv " + (dir() / "half.csv").string());
  expect_same_run("straight", "half");
  // And the other way: 3 steps in one process over 2 shards, 3 more on 2 ranks.
  run(0, "--steps 3 --shards 2 " + out_args("half1"));
  run(2, "--init-from " + (dir() / "half1").string() + " --steps 6 --log-csv " + (dir() / "half1.csv").string());
  expect_same_run("straight", "half1");
}

// --ema-decay: every rank averages the same weights; the saved average (weights.npz) and raw
// weights (training_weights.npz) are those of one process, also across a resume on other ranks.
TEST(DistCli, WeightEmaIsTheSameOnOneAndTwoRanksAndAcrossAResume) {
  run(0, "--steps 4 --shards 2 --ema-decay 0.9 " + out_args("ema_one"));
  run(2, "--steps 4 --ema-decay 0.9 " + out_args("ema_two"));
  expect_same_run("ema_one", "ema_two");
  expect_same_npz(dir() / "ema_one" / "training_weights.npz", dir() / "ema_two" / "training_weights.npz");
  run(2, "--steps 2 --ema-decay 0.9 " + out_args("ema_half"));
  run(0, "--init-from " + (dir() / "ema_half").string() + " --steps 4 --log-csv " + (dir() / "ema_half.csv").string());
  expect_same_run("ema_one", "ema_half");
  expect_same_npz(dir() / "ema_one" / "training_weights.npz", dir() / "ema_half" / "training_weights.npz");
}

TEST(DistCli, ShardsMustBeAMultipleOfTheRanks) {
  const ProgramRun r = testing::run_command(std::string(TG_MPIEXEC) + " " + TG_MPIEXEC_FLAGS + " -np 2 " + kBinary +
                                                " train" + kConfig + " --steps 2 --shards 3",
                                            dir());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("train: shards = 3 is not a multiple of the 2 ranks"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tg
