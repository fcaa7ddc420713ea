// Learning-rate schedulers (nn/lr_scheduler.h) against PyTorch 1.13: the lr of each of two
// parameter groups after construction and after every step, to 1e-12 relative. The reference rows
// are printed by tests/data/make_lr_scheduler_fixture.py (run by hand; this test needs no PyTorch).
// Also: ReduceLROnPlateau's counters, OneCycleLR's momentum, state_dict round trips that continue
// the same sequence, and the argument checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "../autograd/error_of.h"
#include "nn/lr_scheduler.h"
#include "nn/optim.h"

namespace {

using tg::DType;
using tg::Tensor;
using tg::nn::NamedTensors;
using tg::nn::ParamGroup;
using tg::testing::error_of;
using Lrs = std::vector<double>;
constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- PyTorch 1.13 (make_lr_scheduler_fixture.py): each row the groups' lrs, then the case's extras

// StepLR
const std::vector<Lrs> kStepLR = {
    {0.1, 0.02},
    {0.1, 0.02},
    {0.1, 0.02},
    {0.05, 0.01},
    {0.05, 0.01},
    {0.05, 0.01},
    {0.025, 0.005},
    {0.025, 0.005},
    {0.025, 0.005},
    {0.0125, 0.0025},
    {0.0125, 0.0025},
};
// StepLRDefaults
const std::vector<Lrs> kStepLRDefaults = {
    {0.1, 0.02},
    {0.1, 0.02},
    {0.010000000000000002, 0.002},
    {0.010000000000000002, 0.002},
    {0.0010000000000000002, 0.0002},
    {0.0010000000000000002, 0.0002},
};
// MultiStepLR
const std::vector<Lrs> kMultiStepLR = {
    {0.1, 0.02},
    {0.1, 0.02},
    {0.05, 0.01},
    {0.05, 0.01},
    {0.05, 0.01},
    {0.0125, 0.0025},
    {0.0125, 0.0025},
    {0.0125, 0.0025},
    {0.0125, 0.0025},
    {0.00625, 0.00125},
    {0.00625, 0.00125},
    {0.00625, 0.00125},
    {0.00625, 0.00125},
};
// ExponentialLR
const std::vector<Lrs> kExponentialLR = {
    {0.1, 0.02},
    {0.09000000000000001, 0.018000000000000002},
    {0.08100000000000002, 0.016200000000000003},
    {0.07290000000000002, 0.014580000000000003},
    {0.06561000000000002, 0.013122000000000003},
    {0.05904900000000002, 0.011809800000000004},
    {0.05314410000000002, 0.010628820000000004},
    {0.04782969000000002, 0.009565938000000005},
    {0.043046721000000024, 0.008609344200000004},
    {0.03874204890000002, 0.007748409780000004},
    {0.03486784401000002, 0.006973568802000004},
    {0.03138105960900001, 0.006276211921800004},
    {0.028242953648100012, 0.0056485907296200035},
};
// LambdaLR
const std::vector<Lrs> kLambdaLR = {
    {0.1, 0.02},
    {0.095, 0.01},
    {0.09025, 0.006666666666666666},
    {0.0857375, 0.005},
    {0.081450625, 0.004},
    {0.07737809374999999, 0.003333333333333333},
    {0.07350918906249998, 0.002857142857142857},
    {0.06983372960937498, 0.0025},
    {0.06634204312890622, 0.0022222222222222222},
};
// MultiplicativeLR
const std::vector<Lrs> kMultiplicativeLR = {
    {0.1, 0.02},
    {0.09090909090909091, 0.01818181818181818},
    {0.08333333333333333, 0.016666666666666666},
    {0.07692307692307693, 0.015384615384615385},
    {0.07142857142857144, 0.014285714285714287},
    {0.06666666666666668, 0.013333333333333334},
    {0.06250000000000001, 0.0125},
    {0.05882352941176472, 0.011764705882352941},
    {0.055555555555555566, 0.01111111111111111},
};
// LinearLR
const std::vector<Lrs> kLinearLR = {
    {0.025, 0.005},
    {0.03333333333333333, 0.006666666666666666},
    {0.041666666666666664, 0.008333333333333333},
    {0.049999999999999996, 0.01},
    {0.058333333333333334, 0.011666666666666667},
    {0.06666666666666667, 0.013333333333333332},
    {0.075, 0.015},
    {0.075, 0.015},
    {0.075, 0.015},
    {0.075, 0.015},
};
// LinearLRDefaults
const std::vector<Lrs> kLinearLRDefaults = {
    {0.03333333333333333, 0.006666666666666666},
    {0.04666666666666667, 0.009333333333333334},
    {0.060000000000000005, 0.012000000000000002},
    {0.07333333333333335, 0.01466666666666667},
    {0.08666666666666668, 0.01733333333333334},
    {0.1, 0.020000000000000004},
    {0.1, 0.020000000000000004},
    {0.1, 0.020000000000000004},
};
// ConstantLR
const std::vector<Lrs> kConstantLR = {
    {0.05, 0.01},
    {0.05, 0.01},
    {0.05, 0.01},
    {0.05, 0.01},
    {0.1, 0.02},
    {0.1, 0.02},
    {0.1, 0.02},
    {0.1, 0.02},
};
// ConstantLRDefaults
const std::vector<Lrs> kConstantLRDefaults = {
    {0.03333333333333333, 0.006666666666666666},
    {0.03333333333333333, 0.006666666666666666},
    {0.03333333333333333, 0.006666666666666666},
    {0.03333333333333333, 0.006666666666666666},
    {0.03333333333333333, 0.006666666666666666},
    {0.1, 0.019999999999999997},
    {0.1, 0.019999999999999997},
    {0.1, 0.019999999999999997},
};
// CosineAnnealingLR
const std::vector<Lrs> kCosineAnnealingLR = {
    {0.1, 0.02},
    {0.0905463412215599, 0.018185661446562},
    {0.06579634122155989, 0.013435661446562},
    {0.035203658778440096, 0.007564338553437999},
    {0.010453658778440105, 0.002814338553438},
    {0.001, 0.001},
    {0.010453658778440102, 0.002814338553437999},
    {0.03520365877844012, 0.007564338553438001},
    {0.06579634122155993, 0.013435661446562004},
    {0.09054634122155995, 0.01818566144656201},
    {0.10000000000000005, 0.020000000000000007},
    {0.09054634122155998, 0.018185661446562015},
    {0.06579634122155995, 0.013435661446562008},
    {0.03520365877844014, 0.007564338553438004},
    {0.010453658778440116, 0.0028143385534380016},
    {0.001, 0.001},
    {0.010453658778440102, 0.002814338553437999},
    {0.03520365877844012, 0.0075643385534380015},
    {0.06579634122155995, 0.013435661446562008},
    {0.09054634122155997, 0.018185661446562012},
    {0.1000000000000001, 0.020000000000000018},
    {0.09054634122156001, 0.01818566144656202},
    {0.06579634122156008, 0.013435661446562032},
    {0.035203658778440165, 0.007564338553438008},
    {0.01045365877844013, 0.0028143385534380033},
    {0.001, 0.001},
    {0.010453658778440102, 0.002814338553437999},
    {0.035203658778440124, 0.007564338553438003},
};
// WarmupInverseSqrt
const std::vector<Lrs> kWarmupInverseSqrt = {
    {0.025, 0.005},
    {0.05, 0.01},
    {0.07500000000000001, 0.015},
    {0.1, 0.02},
    {0.08944271909999159, 0.01788854381999832},
    {0.08164965809277261, 0.016329931618554522},
    {0.07559289460184544, 0.015118578920369089},
    {0.07071067811865477, 0.014142135623730952},
    {0.06666666666666667, 0.013333333333333332},
    {0.0632455532033676, 0.012649110640673518},
    {0.06030226891555273, 0.012060453783110546},
    {0.057735026918962574, 0.011547005383792514},
    {0.05547001962252292, 0.011094003924504584},
};
// SequentialLR
const std::vector<Lrs> kSequentialLR = {
    {0.05, 0.01},
    {0.05, 0.01},
    {0.1, 0.02},
    {0.1, 0.02},
    {0.09000000000000001, 0.018000000000000002},
    {0.08100000000000002, 0.016200000000000003},
    {0.1, 0.02},
    {0.08681980515339464, 0.01853553390593274},
    {0.05500000000000001, 0.015},
    {0.023180194846605363, 0.011464466094067262},
    {0.01, 0.01},
    {0.023180194846605363, 0.011464466094067262},
    {0.05500000000000002, 0.015},
    {0.08681980515339469, 0.01853553390593274},
    {0.10000000000000006, 0.02},
};
// WarmupCosine
const std::vector<Lrs> kWarmupCosine = {
    {0.010000000000000002, 0.002},
    {0.03250000000000001, 0.006500000000000001},
    {0.055000000000000014, 0.011000000000000001},
    {0.07750000000000003, 0.015500000000000002},
    {0.1, 0.02},
    {0.09330127018922195, 0.01866025403784439},
    {0.07500000000000001, 0.015000000000000001},
    {0.05, 0.01},
    {0.025000000000000012, 0.005000000000000003},
    {0.006698729810778065, 0.001339745962155613},
    {0.0, 0.0},
    {0.006698729810778065, 0.001339745962155613},
    {0.025, 0.005},
};
// PlateauMinRel
const std::vector<Lrs> kPlateauMinRel = {
    {0.1, 0.02, 0.0, 0.0, kInf},
    {0.1, 0.02, 0.0, 0.0, 1.0},
    {0.1, 0.02, 1.0, 0.0, 1.0},
    {0.1, 0.02, 0.0, 0.0, 0.85},
    {0.1, 0.02, 1.0, 0.0, 0.85},
    {0.1, 0.02, 2.0, 0.0, 0.85},
    {0.05, 0.01, 0.0, 1.0, 0.85},
    {0.05, 0.01, 0.0, 0.0, 0.85},
    {0.05, 0.01, 0.0, 0.0, 0.5},
    {0.05, 0.01, 1.0, 0.0, 0.5},
    {0.05, 0.01, 2.0, 0.0, 0.5},
    {0.025, 0.005, 0.0, 1.0, 0.5},
    {0.025, 0.005, 0.0, 0.0, 0.44},
    {0.025, 0.005, 0.0, 0.0, 0.2},
    {0.025, 0.005, 1.0, 0.0, 0.2},
    {0.025, 0.005, 2.0, 0.0, 0.2},
    {0.0125, 0.004, 0.0, 1.0, 0.2},
};
// PlateauMaxAbs
const std::vector<Lrs> kPlateauMaxAbs = {
    {0.1, 0.02, 0.0, 0.0, -kInf},
    {0.1, 0.02, 0.0, 0.0, 0.5},
    {0.010000000000000002, 0.002, 0.0, 0.0, 0.5},
    {0.010000000000000002, 0.002, 0.0, 0.0, 0.56},
    {0.010000000000000002, 0.002, 0.0, 0.0, 0.7},
    {0.0010000000000000002, 0.0005, 0.0, 0.0, 0.7},
    {0.0010000000000000002, 0.0005, 0.0, 0.0, 0.7},
    {0.0010000000000000002, 0.0005, 0.0, 0.0, 0.8},
    {0.0010000000000000002, 0.0005, 0.0, 0.0, 0.8},
};
// OneCycleLR
const std::vector<Lrs> kOneCycleLR = {
    {0.0040000000000000036, 0.0020000000000000018, 0.95, 0.95},
    {0.052000000000000005, 0.026000000000000002, 0.8999999999999999, 0.8999999999999999},
    {0.1, 0.05, 0.85, 0.85},
    {0.09504846320134738, 0.04752423160067369, 0.854951556604879, 0.854951556604879},
    {0.0811745653949763, 0.04058728269748815, 0.8688255099070633, 0.8688255099070633},
    {0.06112620219362893, 0.030563101096814465, 0.8888739533021842, 0.8888739533021842},
    {0.03887419780637107, 0.019437098903185537, 0.9111260466978157, 0.9111260466978157},
    {0.0188258346050237, 0.00941291730251185, 0.9311744900929366, 0.9311744900929366},
    {0.004951936798652629, 0.0024759683993263145, 0.945048443395121, 0.945048443395121},
    {4e-07, 2e-07, 0.95, 0.95},
    {0.004951936798652624, 0.002475968399326312, 0.945048443395121, 0.945048443395121},
};
// OneCycleLRThreePhaseLinear
const std::vector<Lrs> kOneCycleLRThreePhaseLinear = {
    {0.02, 0.02, 0.95, 0.95},
    {0.11000000000000001, 0.11000000000000001, 0.8999999999999999, 0.8999999999999999},
    {0.2, 0.2, 0.85, 0.85},
    {0.11, 0.11, 0.8999999999999999, 0.8999999999999999},
    {0.01999999999999999, 0.01999999999999999, 0.95, 0.95},
    {0.017171428571428574, 0.017171428571428574, 0.95, 0.95},
    {0.014342857142857143, 0.014342857142857143, 0.95, 0.95},
    {0.011514285714285715, 0.011514285714285715, 0.95, 0.95},
    {0.008685714285714286, 0.008685714285714286, 0.95, 0.95},
    {0.005857142857142856, 0.005857142857142856, 0.95, 0.95},
    {0.003028571428571429, 0.003028571428571429, 0.95, 0.95},
    {0.0001999999999999988, 0.0001999999999999988, 0.95, 0.95},
    {-0.002628571428571428, -0.002628571428571428, 0.95, 0.95},
};

// ---- helpers ------------------------------------------------------------------------------------

/// SGD over two parameter groups, lr 0.1 and 0.02, as the generator's.
struct TwoGroups {
  Tensor p = Tensor::zeros({1}).requires_grad_(), q = Tensor::zeros({1}).requires_grad_();
  tg::nn::SGD opt;
  explicit TwoGroups(double momentum = 0.0)
      : opt({ParamGroup({p}), ParamGroup({q}).lr(0.02)}, tg::nn::SGDOptions(0.1).momentum(momentum)) {}
  Lrs lrs() const { return {opt.param_groups()[0].lr(), opt.param_groups()[1].lr()}; }
  Lrs momenta() const {
    Lrs out;
    for (const auto& g : opt.param_groups()) out.push_back(static_cast<const tg::nn::SGDOptions&>(g.options()).momentum());
    return out;
  }
};

/// 1e-12 relative. Here they are the same doubles: nn/lr_scheduler.cpp repeats torch's operations in
/// order and is compiled without FMA contraction.
void expect_close(double got, double want, const std::string& what) {
  EXPECT_NEAR(got, want, 1e-12 * std::abs(want)) << what;
}

/// `values` against want[from, from + values.size()).
void expect_row(const Lrs& values, const Lrs& want, std::size_t from, const std::string& what) {
  ASSERT_GE(want.size(), from + values.size()) << what;
  for (std::size_t k = 0; k < values.size(); ++k) expect_close(values[k], want[from + k], what + ", column " + std::to_string(from + k));
}

/// Row 0 after construction, then one step() per row: the groups' lrs, get_last_lrs() and last_epoch().
void expect_sequence(TwoGroups& o, tg::nn::LRScheduler& s, const std::vector<Lrs>& rows, std::size_t first_row = 0) {
  for (std::size_t r = first_row; r < rows.size(); ++r) {
    if (r > first_row) s.step();
    const std::string what = "row " + std::to_string(r);
    EXPECT_EQ(s.last_epoch(), static_cast<std::int64_t>(r)) << what;
    expect_row(o.lrs(), rows[r], 0, what);
    expect_row(s.get_last_lrs(), rows[r], 0, what + " (get_last_lrs)");
    EXPECT_EQ(s.get_last_lr(), s.get_last_lrs()[0]);
  }
}

// ---- one test per scheduler ---------------------------------------------------------------------

TEST(LRScheduler, StepLR) {
  TwoGroups o, d;
  tg::nn::StepLR s(o.opt, /*step_size=*/3, /*gamma=*/0.5);
  expect_sequence(o, s, kStepLR);
  tg::nn::StepLR defaults(d.opt, 2);  // gamma 0.1
  expect_sequence(d, defaults, kStepLRDefaults);
}

TEST(LRScheduler, MultiStepLRDecaysTwiceAtARepeatedMilestone) {
  TwoGroups o;
  tg::nn::MultiStepLR s(o.opt, {2, 5, 5, 9}, 0.5);
  expect_sequence(o, s, kMultiStepLR);
}

TEST(LRScheduler, ExponentialLR) {
  TwoGroups o;
  tg::nn::ExponentialLR s(o.opt, 0.9);
  expect_sequence(o, s, kExponentialLR);
}

TEST(LRScheduler, LambdaLROneFunctionPerGroup) {
  TwoGroups o;
  tg::nn::LambdaLR s(o.opt, {[](std::int64_t e) { return std::pow(0.95, static_cast<double>(e)); },
                             [](std::int64_t e) { return 1.0 / static_cast<double>(e + 1); }});
  expect_sequence(o, s, kLambdaLR);
}

TEST(LRScheduler, MultiplicativeLR) {
  TwoGroups o;
  tg::nn::MultiplicativeLR s(o.opt, [](std::int64_t e) { return static_cast<double>(e + 9) / static_cast<double>(e + 10); });
  expect_sequence(o, s, kMultiplicativeLR);
}

TEST(LRScheduler, LinearLR) {
  TwoGroups o, d;
  tg::nn::LinearLR s(o.opt, 0.25, 0.75, 6);
  expect_sequence(o, s, kLinearLR);
  tg::nn::LinearLR defaults(d.opt);  // 1/3 to 1 over 5 epochs
  expect_sequence(d, defaults, kLinearLRDefaults);
}

TEST(LRScheduler, ConstantLR) {
  TwoGroups o, d;
  tg::nn::ConstantLR s(o.opt, 0.5, 4);
  expect_sequence(o, s, kConstantLR);
  tg::nn::ConstantLR defaults(d.opt);  // 1/3 for 5 epochs
  expect_sequence(d, defaults, kConstantLRDefaults);
}

TEST(LRScheduler, CosineAnnealingLRRisesAgainAfterTMax) {
  TwoGroups o;
  tg::nn::CosineAnnealingLR s(o.opt, /*T_max=*/5, /*eta_min=*/0.001);
  expect_sequence(o, s, kCosineAnnealingLR);  // 27 epochs: the bottoms at 5, 15, 25, the tops at 10, 20
}

TEST(LRScheduler, TransformerScheduleAsLambdaLRAndAsWarmupInverseSqrtLR) {
  TwoGroups o, n;
  const double w = 4;
  // The one line of nn/lr_scheduler.h's comment.
  tg::nn::LambdaLR sched(o.opt, [w](std::int64_t e) { double s = e + 1.0; return std::min(s / w, std::sqrt(w / s)); });
  expect_sequence(o, sched, kWarmupInverseSqrt);
  tg::nn::WarmupInverseSqrtLR named(n.opt, 4);
  expect_sequence(n, named, kWarmupInverseSqrt);
  expect_close(named.lr_at(5, 1), kWarmupInverseSqrt[4][1], "lr_at(5, 1)");
  TwoGroups r;  // resumed after 6 updates: update 7's rate first
  tg::nn::WarmupInverseSqrtLR resumed(r.opt, 4, /*start_step=*/6);
  expect_row(r.lrs(), kWarmupInverseSqrt[6], 0, "resumed");
}

TEST(LRScheduler, SequentialLRRestartsEachSchedulerAtItsMilestone) {
  TwoGroups o;
  auto constant = std::make_shared<tg::nn::ConstantLR>(o.opt, 0.5, 2);
  auto expo = std::make_shared<tg::nn::ExponentialLR>(o.opt, 0.9);
  auto cosine = std::make_shared<tg::nn::CosineAnnealingLR>(o.opt, 4, 0.01);
  tg::nn::SequentialLR s(o.opt, {constant, expo, cosine}, {3, 6});
  EXPECT_EQ(expo->base_lrs(), (Lrs{0.1, 0.02}));  // the first scheduler's, as torch's shared initial_lr
  expect_sequence(o, s, kSequentialLR);
  EXPECT_EQ(cosine->last_epoch(), 8);
}

TEST(LRScheduler, SequentialLRWarmupThenCosine) {
  TwoGroups o;
  auto warm = std::make_shared<tg::nn::LinearLR>(o.opt, 0.1, 1.0, 4);
  auto cosine = std::make_shared<tg::nn::CosineAnnealingLR>(o.opt, 6);
  tg::nn::SequentialLR s(o.opt, {warm, cosine}, {4});
  expect_sequence(o, s, kWarmupCosine);
}

/// Steps a ReduceLROnPlateau through `metrics`; rows hold lrs, num_bad_epochs, cooldown_counter, best.
void expect_plateau(TwoGroups& o, tg::nn::ReduceLROnPlateau& s, const std::vector<double>& metrics,
                    const std::vector<Lrs>& rows, std::size_t first_row = 0) {
  for (std::size_t r = first_row; r < rows.size(); ++r) {
    if (r > first_row) s.step(metrics[r - 1]);
    const std::string what = "row " + std::to_string(r);
    EXPECT_EQ(s.last_epoch(), static_cast<std::int64_t>(r)) << what;
    expect_row(o.lrs(), rows[r], 0, what);
    expect_row(s.get_last_lrs(), rows[r], 0, what + " (get_last_lrs)");
    EXPECT_EQ(s.num_bad_epochs(), static_cast<std::int64_t>(rows[r][2])) << what;
    EXPECT_EQ(s.cooldown_counter(), static_cast<std::int64_t>(rows[r][3])) << what;
    EXPECT_EQ(s.best(), rows[r][4]) << what;
  }
}

const std::vector<double> kMinRelMetrics{1.0, 0.95, 0.85, 0.9, 0.9, 0.9, 0.9, 0.5, 0.46, 0.45, 0.45, 0.44, 0.2, 0.2, 0.2, 0.2};
const std::vector<double> kMaxAbsMetrics{0.5, 0.54, 0.56, 0.7, 0.6, 0.74, 0.8, 0.1};
using Plateau = tg::nn::ReduceLROnPlateau;

TEST(LRScheduler, ReduceLROnPlateauPatienceCooldownThresholdAndMinLr) {
  // min mode, relative threshold 10%: 0.95 does not improve on 1.0, 0.46 does not on 0.5; after 3
  // bad epochs (patience 2) the lr halves, then 1 epoch of cooldown; the second group stops at 0.004.
  TwoGroups o;
  Plateau s(o.opt, Plateau::Mode::min, 0.5, 2, 0.1, Plateau::ThresholdMode::rel, 1, {0.01, 0.004});
  expect_plateau(o, s, kMinRelMetrics, kPlateauMinRel);
  // max mode, absolute threshold 0.05, patience 0: the first group's last cut (0.001 -> 0.00095)
  // is below eps = 1e-4 and is skipped.
  TwoGroups m;
  Plateau x(m.opt, Plateau::Mode::max, 0.1, 0, 0.05, Plateau::ThresholdMode::abs, 0, {0.00095, 0.0005}, 1e-4);
  expect_plateau(m, x, kMaxAbsMetrics, kPlateauMaxAbs);
  // The defaults are torch's: min mode, factor 0.1, patience 10, rel 1e-4, cooldown 0.
  TwoGroups d;
  Plateau defaults(d.opt);
  for (int e = 0; e < 11; ++e) defaults.step(1.0);
  EXPECT_EQ(d.lrs(), (Lrs{0.1, 0.02}));
  defaults.step(0.99991);  // not 1e-4 better than 1.0
  EXPECT_EQ(d.lrs(), (Lrs{0.1 * 0.1, 0.02 * 0.1}));
  EXPECT_TRUE(defaults.is_better(0.9998, 1.0));
  EXPECT_FALSE(defaults.is_better(std::nan(""), 1.0));
}

TEST(LRScheduler, OneCycleLRCyclesTheMomentumInversely) {
  TwoGroups o(0.9);
  tg::nn::OneCycleLR s(o.opt, {0.1, 0.05}, /*total_steps=*/10);
  for (std::size_t r = 0; r < kOneCycleLR.size(); ++r) {
    if (r > 0) s.step();
    expect_row(o.lrs(), kOneCycleLR[r], 0, "row " + std::to_string(r));
    expect_row(o.momenta(), kOneCycleLR[r], 2, "row " + std::to_string(r) + " momentum");
  }
  EXPECT_EQ(s.base_lrs(), (Lrs{0.1 / 25, 0.05 / 25}));
  // torch's count includes construction's step.
  EXPECT_EQ(error_of<std::invalid_argument>([&] { s.step(); }),
            "OneCycleLR: tried to step 12 times; the specified number of total steps is 10");
  EXPECT_EQ(s.last_epoch(), 10);  // a refused step changes nothing

  // Three phases, linear, from epochs * steps_per_epoch; Adam's beta1 is its momentum.
  TwoGroups t(0.9);
  tg::nn::OneCycleLR three(t.opt, 0.2, std::nullopt, /*epochs=*/3, /*steps_per_epoch=*/4, 0.25,
                           tg::nn::OneCycleLR::AnnealStrategy::linear, true, 0.85, 0.95, 10.0, 100.0, true);
  const auto& rows = kOneCycleLRThreePhaseLinear;
  for (std::size_t r = 0; r + 1 < rows.size(); ++r) {
    if (r > 0) three.step();
    expect_row(t.lrs(), rows[r], 0, "three-phase row " + std::to_string(r));
    expect_row(t.momenta(), rows[r], 2, "three-phase row " + std::to_string(r) + " momentum");
  }
  // torch extrapolates the last phase to step total_steps, here below 0: refused, nothing changes.
  ASSERT_LT(rows.back()[0], 0.0);
  EXPECT_EQ(error_of<std::invalid_argument>([&] { three.step(); }),
            "SGD: invalid learning rate " + [&] { std::ostringstream os; os << rows.back()[0]; return os.str(); }());
  expect_row(t.lrs(), rows[rows.size() - 2], 0, "after the refused step");
  expect_row(t.momenta(), rows[rows.size() - 2], 2, "after the refused step");
  EXPECT_EQ(three.last_epoch(), 11);

  Tensor w = Tensor::zeros({1}).requires_grad_();
  tg::nn::Adam adam(std::vector<Tensor>{w}, tg::nn::AdamOptions(0.1));
  tg::nn::OneCycleLR on_adam(adam, 0.1, 10);
  EXPECT_EQ(adam.options().betas().first, kOneCycleLR[0][2]);
  EXPECT_EQ(adam.options().betas().second, 0.999);
  on_adam.step();
  EXPECT_EQ(adam.options().betas().first, kOneCycleLR[1][2]);
}

// ---- state_dict ---------------------------------------------------------------------------------

// A few steps, state_dict(), then a fresh optimizer and scheduler built the same way load it and
// continue: the reference rows from there on must follow.
TEST(LRScheduler, StateDictContinuesTheSameSequence) {
  {
    TwoGroups a, b;
    tg::nn::CosineAnnealingLR s(a.opt, 5, 0.001), t(b.opt, 5, 0.001);
    for (int e = 0; e < 7; ++e) s.step();
    const NamedTensors state = s.state_dict();
    ASSERT_EQ(state.size(), 3u);
    EXPECT_EQ(state[0].first, "lr_scheduler.last_epoch");
    EXPECT_EQ(state[1].first, "lr_scheduler.base_lrs");
    EXPECT_EQ(state[2].first, "lr_scheduler.last_lrs");
    EXPECT_EQ(state[2].second.dtype(), DType::f64);
    t.load_state_dict(state);  // also sets b's groups to epoch 7's lrs
    expect_sequence(b, t, kCosineAnnealingLR, 7);
  }
  {
    auto build = [](TwoGroups& o) {
      return std::make_unique<tg::nn::SequentialLR>(
          o.opt, std::vector<std::shared_ptr<tg::nn::LRScheduler>>{std::make_shared<tg::nn::ConstantLR>(o.opt, 0.5, 2),
                                                                 std::make_shared<tg::nn::ExponentialLR>(o.opt, 0.9),
                                                                 std::make_shared<tg::nn::CosineAnnealingLR>(o.opt, 4, 0.01)},
          std::vector<std::int64_t>{3, 6});
    };
    TwoGroups a, b;
    auto s = build(a), t = build(b);
    for (int e = 0; e < 5; ++e) s->step();
    const NamedTensors state = s->state_dict();
    EXPECT_EQ(state.size(), 12u);  // its own three entries and three per scheduler
    EXPECT_EQ(state[3].first, "lr_scheduler.schedulers.0.last_epoch");
    t->load_state_dict(state);
    expect_sequence(b, *t, kSequentialLR, 5);  // crosses the milestone at 6
  }
  {
    TwoGroups a, b;
    Plateau s(a.opt, Plateau::Mode::min, 0.5, 2, 0.1, Plateau::ThresholdMode::rel, 1, {0.01, 0.004});
    Plateau t(b.opt, Plateau::Mode::min, 0.5, 2, 0.1, Plateau::ThresholdMode::rel, 1, {0.01, 0.004});
    for (int e = 0; e < 6; ++e) s.step(kMinRelMetrics[e]);
    ASSERT_TRUE(s.in_cooldown());
    t.load_state_dict(s.state_dict());
    expect_plateau(b, t, kMinRelMetrics, kPlateauMinRel, 6);
  }
  {
    TwoGroups a(0.9), b(0.9);
    tg::nn::OneCycleLR s(a.opt, {0.1, 0.05}, 10), t(b.opt, {0.1, 0.05}, 10);
    for (int e = 0; e < 4; ++e) s.step();
    t.load_state_dict(s.state_dict());
    expect_row(b.momenta(), kOneCycleLR[4], 2, "momentum after load");
    expect_sequence(b, t, kOneCycleLR, 4);
  }
}

TEST(LRScheduler, LoadStateDictChecksEverythingFirst) {
  TwoGroups a, b;
  tg::nn::StepLR s(a.opt, 3, 0.5), t(b.opt, 3, 0.5);
  s.step();
  NamedTensors state = s.state_dict();
  state[1].second = Tensor::from_vector(std::vector<double>{0.1}, {1});  // one group's base lr
  state.erase(state.begin());                                            // no last_epoch
  state.emplace_back("lr_scheduler.gamma", Tensor::scalar(0.5, DType::f64));
  EXPECT_EQ(error_of<std::runtime_error>([&] { t.load_state_dict(state, "load s.npz"); }),
            "load s.npz: missing: [lr_scheduler.last_epoch]; unexpected: [lr_scheduler.gamma]; "
            "shape mismatch: [lr_scheduler.base_lrs: file [1] vs [2]]");
  EXPECT_EQ(t.last_epoch(), 0);
  EXPECT_EQ(b.lrs(), (Lrs{0.1, 0.02}));
  NamedTensors negative = s.state_dict();
  negative[2].second = Tensor::from_vector(std::vector<double>{-1.0, 0.02}, {2});
  EXPECT_EQ(error_of<std::runtime_error>([&] { t.load_state_dict(negative); }),
            "load_state_dict: invalid: [lr_scheduler.last_lrs: learning rate -1]");
}

// ---- arguments ----------------------------------------------------------------------------------

TEST(LRScheduler, ArgumentChecks) {
  TwoGroups o, other;
  EXPECT_EQ(error_of<std::invalid_argument>([&] { tg::nn::ConstantLR(o.opt, 0.0); }),
            "ConstantLR: factor must be in (0, 1], got 0");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { tg::nn::MultiStepLR(o.opt, {1}, -0.5); }),
            "MultiStepLR: invalid gamma -0.5");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { tg::nn::CosineAnnealingLR(o.opt, 0); }),
            "CosineAnnealingLR: T_max must be >= 1, got 0");
  const std::vector<tg::nn::LambdaLR::Lambda> one{[](std::int64_t) { return 1.0; }};
  EXPECT_EQ(error_of<std::invalid_argument>([&] { tg::nn::LambdaLR(o.opt, one); }),
            "LambdaLR: expected 2 lr_lambdas, but got 1");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { Plateau(o.opt, Plateau::Mode::min, 1.0); }),
            "ReduceLROnPlateau: factor should be < 1.0, got 1");
  EXPECT_EQ(error_of<std::invalid_argument>(
                [&] { Plateau(o.opt, Plateau::Mode::min, 0.1, 10, 1e-4, Plateau::ThresholdMode::rel, 0, {0.1}); }),
            "ReduceLROnPlateau: expected 2 values for min_lr, got 1");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { tg::nn::OneCycleLR(o.opt, 0.1); }),
            "OneCycleLR: you must define either total_steps OR (epochs AND steps_per_epoch)");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { tg::nn::OneCycleLR(o.opt, 0.1, 10, {}, {}, 1.5); }),
            "OneCycleLR: expected float between 0 and 1 pct_start, but got 1.5");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { tg::nn::OneCycleLR(o.opt, 0.1, 0); }),
            "OneCycleLR: expected positive integer total_steps, but got 0");

  auto mine = std::make_shared<tg::nn::StepLR>(o.opt, 2);
  auto theirs = std::make_shared<tg::nn::StepLR>(other.opt, 2);
  EXPECT_EQ(error_of<std::invalid_argument>([&] { tg::nn::SequentialLR(o.opt, {mine, theirs}, {2}); }),
            "SequentialLR: scheduler 1 belongs to another optimizer than the one passed in");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { tg::nn::SequentialLR(o.opt, {mine}, {2}); }),
            "SequentialLR: expected one milestone fewer than schedulers, got 1 schedulers and 1 milestones");
}

}  // namespace
