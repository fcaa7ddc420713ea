// Optimizer parameter groups (torch's param_groups): per-group options against the plain-loop
// references of the update rules, defaults, add_param_group, schedulers over every group, and a
// state_dict that does not depend on the grouping.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "../autograd/error_of.h"
#include "autograd/random.h"
#include "nn/optim.h"
#include "nn/utils.h"

namespace {

using tg::DType;
using tg::Generator;
using tg::Tensor;
using tg::nn::AdamOptions;
using tg::nn::AdamWOptions;
using tg::nn::NamedTensors;
using tg::nn::ParamGroup;
using tg::nn::SGDOptions;
using tg::testing::error_of;
using Vec = std::vector<double>;

/// torch.optim.AdamW / SGD (1.13 docs) on one parameter, in double.
struct AdamWRef {
  double lr, wd, b1 = 0.9, b2 = 0.999, eps = 1e-8;
  Vec m, v;
  int t = 0;
  void step(Vec& p, const Vec& g) {
    if (m.empty()) m.assign(p.size(), 0.0), v.assign(p.size(), 0.0);
    ++t;
    for (std::size_t i = 0; i < p.size(); ++i) {
      p[i] *= 1 - lr * wd;
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      p[i] -= lr / (1 - std::pow(b1, t)) * m[i] / (std::sqrt(v[i]) / std::sqrt(1 - std::pow(b2, t)) + eps);
    }
  }
};

struct SgdRef {
  double lr, momentum, wd;
  Vec buf;
  void step(Vec& p, const Vec& g) {
    const bool first = buf.empty();
    if (first) buf.assign(p.size(), 0.0);
    for (std::size_t i = 0; i < p.size(); ++i) {
      double d = g[i] + wd * p[i];
      if (momentum != 0) d = buf[i] = first ? d : momentum * buf[i] + d;
      p[i] -= lr * d;
    }
  }
};

/// A Linear(4 -> 3) followed by a LayerNorm(3), as named float64 tensors, and 3 steps of gradients.
struct Model {
  NamedTensors params;
  std::vector<std::vector<Vec>> grads;  // [step][param]
  explicit Model(std::uint64_t seed) {
    Generator gen(seed);
    for (const auto& [name, shape] : std::vector<std::pair<std::string, tg::Shape>>{
             {"fc.weight", {3, 4}}, {"fc.bias", {3}}, {"norm.weight", {3}}, {"norm.bias", {3}}})
      params.emplace_back(name, Tensor::uniform(shape, -1, 1, gen, DType::f64).requires_grad_());
    for (int s = 0; s < 3; ++s) {
      grads.emplace_back();
      for (const auto& [_, p] : params) grads.back().push_back(Tensor::normal(p.shape(), 0, 0.5, gen, DType::f64).to_vector<double>());
    }
  }
  void set_grads(int s) {
    for (std::size_t i = 0; i < params.size(); ++i)
      params[i].second.set_grad(Tensor::from_vector(grads[static_cast<std::size_t>(s)][i], params[i].second.shape()));
  }
};

/// The usual split: weight decay on weight matrices only, not on biases and normalisation weights.
std::pair<NamedTensors, NamedTensors> split_decay(const NamedTensors& params) {
  NamedTensors decay, no_decay;
  for (const auto& entry : params)
    (entry.first.ends_with("bias") || entry.first.find("norm") != std::string::npos ? no_decay : decay).push_back(entry);
  return {decay, no_decay};
}

TEST(ParamGroups, NoWeightDecayOnNormsAndBiases) {
  Model model(1);
  std::vector<Vec> ref_p;
  for (const auto& [_, p] : model.params) ref_p.push_back(p.to_vector<double>());
  const auto [decay, no_decay] = split_decay(model.params);
  ASSERT_EQ(decay.size(), 1u);
  tg::nn::AdamW opt({ParamGroup(decay), ParamGroup(no_decay).weight_decay(0.0)}, AdamWOptions(0.05).weight_decay(0.1));
  ASSERT_EQ(opt.param_groups().size(), 2u);
  EXPECT_EQ(static_cast<const AdamOptions&>(opt.param_groups()[0].options()).weight_decay(), 0.1);
  EXPECT_EQ(static_cast<const AdamOptions&>(opt.param_groups()[1].options()).weight_decay(), 0.0);
  EXPECT_EQ(opt.param_groups()[1].lr(), 0.05);  // from the defaults
  // By hand: AdamW with wd 0.1 on fc.weight, 0 on the rest (the optimizer keeps group order).
  std::vector<AdamWRef> refs;
  for (const auto& [name, _] : model.params) refs.push_back(AdamWRef{.lr = 0.05, .wd = name == "fc.weight" ? 0.1 : 0.0});
  for (int s = 0; s < 3; ++s) {
    model.set_grads(s);
    opt.step();
    for (std::size_t i = 0; i < refs.size(); ++i) refs[i].step(ref_p[i], model.grads[static_cast<std::size_t>(s)][i]);
  }
  for (std::size_t i = 0; i < model.params.size(); ++i) {
    const Vec got = model.params[i].second.to_vector<double>();
    for (std::size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], ref_p[i][k], 1e-13) << model.params[i].first << "[" << k << "]";
  }
  // Bit for bit what two separate optimizers give.
  Model a(1);
  const auto [da, na] = split_decay(a.params);
  tg::nn::AdamW with_decay(da, AdamWOptions(0.05).weight_decay(0.1)), without(na, AdamWOptions(0.05).weight_decay(0.0));
  for (int s = 0; s < 3; ++s) {
    a.set_grads(s);
    with_decay.step();
    without.step();
  }
  for (std::size_t i = 0; i < a.params.size(); ++i)
    EXPECT_EQ(a.params[i].second.to_vector<double>(), model.params[i].second.to_vector<double>()) << a.params[i].first;
}

TEST(ParamGroups, SgdGroupsHaveTheirOwnLrMomentumAndDecay) {
  Model model(2);
  std::vector<Vec> ref_p;
  for (const auto& [_, p] : model.params) ref_p.push_back(p.to_vector<double>());
  NamedTensors first(model.params.begin(), model.params.begin() + 2), second(model.params.begin() + 2, model.params.end());
  tg::nn::SGD opt({ParamGroup(first), ParamGroup(second).lr(0.01).momentum(0.0).weight_decay(0.2)},
                  SGDOptions(0.1).momentum(0.9));
  std::vector<SgdRef> refs = {{0.1, 0.9, 0.0}, {0.1, 0.9, 0.0}, {0.01, 0.0, 0.2}, {0.01, 0.0, 0.2}};
  for (int s = 0; s < 3; ++s) {
    model.set_grads(s);
    opt.step();
    for (std::size_t i = 0; i < refs.size(); ++i) refs[i].step(ref_p[i], model.grads[static_cast<std::size_t>(s)][i]);
  }
  for (std::size_t i = 0; i < model.params.size(); ++i) {
    const Vec got = model.params[i].second.to_vector<double>();
    for (std::size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], ref_p[i][k], 1e-13) << model.params[i].first << "[" << k << "]";
  }
  // Only the momentum group keeps momentum buffers.
  std::vector<std::string> keys;
  for (const auto& [k, _] : opt.state_dict()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"optimizer.momentum_buffer.fc.weight", "optimizer.step.fc.weight",
                                            "optimizer.momentum_buffer.fc.bias", "optimizer.step.fc.bias",
                                            "optimizer.step.norm.weight", "optimizer.step.norm.bias", "optimizer.step"}));
}

TEST(ParamGroups, GroupOptionsAreReadAndChangedInPlace) {
  Tensor p = Tensor::zeros({2}).requires_grad_(), q = Tensor::zeros({2}).requires_grad_();
  tg::nn::Adam opt({ParamGroup({p}), ParamGroup({q}).lr(0.5).betas(0.8, 0.9)}, AdamOptions(0.1).eps(1e-6));
  auto groups = opt.param_groups();
  EXPECT_EQ(groups[0].lr(), 0.1);
  EXPECT_EQ(groups[1].lr(), 0.5);
  const auto& o1 = static_cast<const AdamOptions&>(groups[1].options());
  EXPECT_EQ(o1.betas(), (std::pair<double, double>{0.8, 0.9}));
  EXPECT_EQ(o1.eps(), 1e-6);  // not set by the group: the default
  EXPECT_EQ(opt.defaults().get_lr(), 0.1);
  // Unnamed parameters are numbered across the groups, as torch's state_dict keys.
  EXPECT_EQ(groups[0].params()[0].first, "0");
  EXPECT_EQ(groups[1].params()[0].first, "1");
  groups[1].set_lr(0.25);  // param_group["lr"] = 0.25
  EXPECT_EQ(opt.param_groups()[1].lr(), 0.25);
  EXPECT_EQ(opt.lr(), 0.1);  // the first group's
  groups[0].lr(0.3);         // the chainable setter sets it too once the group is in the optimizer
  EXPECT_EQ(opt.options().lr(), 0.3);
  static_cast<AdamOptions&>(groups[1].options()).weight_decay(0.5);
  EXPECT_EQ(opt.param_groups()[1].overrides().weight_decay, std::nullopt);
  EXPECT_THROW(groups[1].weight_decay(0.1), std::logic_error);
  EXPECT_EQ(error_of([&] { groups[1].set_lr(-1); }), "ParamGroup: invalid learning rate -1");
  opt.set_lr(0.7);  // every group
  EXPECT_EQ(opt.param_groups()[0].lr(), 0.7);
  EXPECT_EQ(opt.param_groups()[1].lr(), 0.7);
  EXPECT_EQ(opt.defaults().get_lr(), 0.1);  // defaults are not the groups'
  EXPECT_THROW(ParamGroup({p}).options(), std::logic_error);
}

TEST(ParamGroups, AddParamGroupTakesTheDefaultsAndChecksEverything) {
  Tensor p = Tensor::ones({3}).requires_grad_(), q = Tensor::ones({3}).requires_grad_();
  tg::nn::Adam opt(std::vector<Tensor>{p}, AdamOptions(0.1).weight_decay(0.01));
  EXPECT_EQ(error_of([&] { opt.add_param_group(ParamGroup({q}).momentum(0.9)); }),
            "Adam: param group 1 sets momentum, which Adam does not have");
  EXPECT_EQ(error_of([&] { opt.add_param_group(ParamGroup({q}).betas(1.0, 0.9)); }),
            "Adam: invalid beta parameter at index 0: 1 (param group 1)");
  EXPECT_EQ(error_of([&] { opt.add_param_group(ParamGroup({p})); }), "Adam: parameter '1' appears more than once");
  EXPECT_EQ(error_of([&] { opt.add_param_group(ParamGroup(std::vector<Tensor>{})); }),
            "Adam: add_param_group: the group has no parameters");
  EXPECT_EQ(error_of([&] { opt.add_param_group(ParamGroup(NamedTensors{{"0", q}})); }),
            "Adam: duplicate parameter name '0'");
  ASSERT_EQ(opt.param_groups().size(), 1u);  // nothing was added by the failed calls
  ASSERT_EQ(opt.named_parameters().size(), 1u);
  opt.add_param_group(ParamGroup({q}).lr(0.5));
  ASSERT_EQ(opt.param_groups().size(), 2u);
  EXPECT_EQ(opt.param_groups()[1].lr(), 0.5);
  EXPECT_EQ(static_cast<const AdamOptions&>(opt.param_groups()[1].options()).weight_decay(), 0.01);
  // The new group's parameter is updated with its own lr: Adam's first step moves by lr.
  p.set_grad(Tensor::ones({3}));
  q.set_grad(Tensor::ones({3}));
  opt.step();
  // Adam's first step moves each element by lr * g / (|g| + eps), g = 1 + wd p: lr to 1e-7.
  EXPECT_NEAR(p.to_vector<double>()[0], 1 - 0.1, 1e-6);
  EXPECT_NEAR(q.to_vector<double>()[0], 1 - 0.5, 1e-6);
  // SGD refuses Adam's options.
  Tensor r = Tensor::ones({1}).requires_grad_();
  EXPECT_EQ(error_of([&] { tg::nn::SGD({ParamGroup({r}).eps(1e-3)}, SGDOptions(0.1)); }),
            "SGD: param group 0 sets eps, which SGD does not have");
  EXPECT_EQ(error_of([&] { tg::nn::SGD({ParamGroup({r}).nesterov(true)}, SGDOptions(0.1)); }),
            "SGD: Nesterov momentum requires a momentum and zero dampening (param group 0)");
  EXPECT_EQ(error_of([&] { tg::nn::SGD({ParamGroup({r}), ParamGroup(std::vector<Tensor>{r})}, SGDOptions(0.1)); }),
            "SGD: parameter '1' appears more than once");
}

TEST(ParamGroups, SchedulersSetEveryGroupsLearningRate) {
  Tensor p = Tensor::zeros({1}).requires_grad_(), q = Tensor::zeros({1}).requires_grad_();
  auto make = [&] { return std::make_unique<tg::nn::SGD>(std::vector<ParamGroup>{ParamGroup({p}), ParamGroup({q}).lr(0.01)}, SGDOptions(0.1)); };
  auto opt = make();
  tg::nn::StepLR step_lr(*opt, 2, 0.5);
  step_lr.step();
  step_lr.step();
  EXPECT_EQ(opt->param_groups()[0].lr(), 0.1 * 0.5);
  EXPECT_EQ(opt->param_groups()[1].lr(), 0.01 * 0.5);
  EXPECT_EQ(step_lr.get_last_lrs(), (std::vector<double>{0.05, 0.005}));
  EXPECT_EQ(step_lr.get_last_lr(), 0.05);

  opt = make();
  tg::nn::LinearLR linear(*opt, 0.5, 1.0, 2);  // construction sets lr * start_factor in each group
  EXPECT_EQ(opt->param_groups()[0].lr(), 0.1 * 0.5);
  EXPECT_EQ(opt->param_groups()[1].lr(), 0.01 * 0.5);
  linear.step();
  linear.step();
  EXPECT_DOUBLE_EQ(opt->param_groups()[0].lr(), 0.1);  // torch's recurrence: rounding, not exact
  EXPECT_DOUBLE_EQ(opt->param_groups()[1].lr(), 0.01);

  opt = make();
  tg::nn::WarmupInverseSqrtLR warm(*opt, 4);  // each group from its own base lr
  EXPECT_EQ(opt->param_groups()[0].lr(), 0.1 * 0.25);
  EXPECT_EQ(opt->param_groups()[1].lr(), 0.01 * 0.25);
  EXPECT_EQ(warm.lr_at(16, 1), 0.01 * 0.5);

  // A group added after the scheduler was built is not scheduled (torch zips over its base_lrs).
  opt = make();
  tg::nn::ExponentialLR expo(*opt, 0.5);
  Tensor r = Tensor::zeros({1}).requires_grad_();
  opt->add_param_group(ParamGroup({r}).lr(0.3));
  expo.step();
  EXPECT_EQ(opt->param_groups()[0].lr(), 0.05);
  EXPECT_EQ(opt->param_groups()[1].lr(), 0.005);
  EXPECT_EQ(opt->param_groups()[2].lr(), 0.3);
}

TEST(ParamGroups, StateDictKeysDoNotDependOnTheGrouping) {
  // One group or two with the same options: the same keys, and a state saved from one loads into
  // the other and continues bit for bit.
  Model one(3), two(3);
  tg::nn::Adam single(one.params, AdamOptions(0.05));
  tg::nn::Adam grouped({ParamGroup(NamedTensors(two.params.begin(), two.params.begin() + 1)),
                        ParamGroup(NamedTensors(two.params.begin() + 1, two.params.end()))},
                       AdamOptions(0.05));
  for (int s = 0; s < 2; ++s) {
    one.set_grads(s);
    two.set_grads(s);
    single.step();
    grouped.step();
  }
  const NamedTensors a = single.state_dict(), b = grouped.state_dict();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_EQ(a[i].second.to_vector<double>(), b[i].second.to_vector<double>()) << a[i].first;
  }
  // The single-group state into a fresh grouped optimizer over copies of the parameters.
  Model three(3);
  for (std::size_t i = 0; i < three.params.size(); ++i) three.params[i].second.copy_(one.params[i].second.detach());
  tg::nn::Adam regrouped({ParamGroup(NamedTensors(three.params.begin(), three.params.begin() + 3)),
                          ParamGroup(NamedTensors(three.params.begin() + 3, three.params.end()))},
                         AdamOptions(0.05));
  regrouped.load_state_dict(a);
  EXPECT_EQ(regrouped.step_count(), 2);
  one.set_grads(2);
  three.set_grads(2);
  single.step();
  regrouped.step();
  for (std::size_t i = 0; i < one.params.size(); ++i)
    EXPECT_EQ(one.params[i].second.to_vector<double>(), three.params[i].second.to_vector<double>()) << one.params[i].first;
}

TEST(ParamGroups, SgdMomentumBuffersOnlyWhereTheGroupHasMomentum) {
  Model a(4), b(4);
  auto build = [](Model& m) {
    return std::make_unique<tg::nn::SGD>(
        std::vector<ParamGroup>{ParamGroup(NamedTensors(m.params.begin(), m.params.begin() + 2)).momentum(0.9),
                                ParamGroup(NamedTensors(m.params.begin() + 2, m.params.end()))},
        SGDOptions(0.1));
  };
  auto oa = build(a), ob = build(b);
  a.set_grads(0);
  oa->step();
  NamedTensors state = oa->state_dict();
  ob->load_state_dict(state);  // round trip
  // A momentum buffer for a parameter of the group without momentum is not part of the state.
  state.emplace_back("optimizer.momentum_buffer.norm.bias", Tensor::zeros({3}, DType::f64));
  EXPECT_EQ(error_of([&] { ob->load_state_dict(state, "f"); }),
            "f (SGD state): unexpected: [optimizer.momentum_buffer.norm.bias]");
}

}  // namespace
