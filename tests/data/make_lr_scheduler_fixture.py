#!/usr/bin/python3
"""Prints PyTorch 1.13's learning-rate sequences for tests/nn/test_lr_scheduler.cpp as C++ literals.

Run by hand (the C++ test embeds the output; it does not need PyTorch):
    /usr/bin/python3 tests/data/make_lr_scheduler_fixture.py
Needs Debian's python3-torch (1.13). Every case runs SGD over two parameter groups (lr 0.1 and
0.02) unless it says otherwise; a row holds the groups' lrs after construction, then after each step().
repr() prints the shortest decimal that reads back as the same double.
"""
import math
import warnings

import torch
from torch.optim import lr_scheduler as S

warnings.simplefilter("ignore")  # "lr_scheduler.step() before optimizer.step()"


def sgd(momentum=0.0):
    p, q = torch.zeros(1, requires_grad=True), torch.zeros(1, requires_grad=True)
    return torch.optim.SGD([{"params": [p]}, {"params": [q], "lr": 0.02}], lr=0.1, momentum=momentum)


def emit(name, rows):
    print(f"// {name}")
    print(f"const std::vector<Lrs> k{name} = {{")
    for r in rows:
        print("    {" + ", ".join(("-kInf" if v < 0 else "kInf") if math.isinf(v) else repr(float(v)) for v in r) + "},")
    print("};")


def run(name, make, steps, metrics=None, extra=None):
    opt = sgd(0.9) if name.startswith("OneCycle") else sgd()
    sched = make(opt)
    lrs = lambda: [g["lr"] for g in opt.param_groups]  # get_last_lr(), which 1.13's ReduceLROnPlateau lacks
    rows = [lrs() + (extra(sched, opt) if extra else [])]
    for i in range(steps):
        sched.step(metrics[i]) if metrics else sched.step()
        rows.append(lrs() + (extra(sched, opt) if extra else []))
    emit(name, rows)


run("StepLR", lambda o: S.StepLR(o, step_size=3, gamma=0.5), 10)
run("StepLRDefaults", lambda o: S.StepLR(o, 2), 5)
run("MultiStepLR", lambda o: S.MultiStepLR(o, milestones=[2, 5, 5, 9], gamma=0.5), 12)
run("ExponentialLR", lambda o: S.ExponentialLR(o, gamma=0.9), 12)
run("LambdaLR", lambda o: S.LambdaLR(o, [lambda e: 0.95 ** e, lambda e: 1.0 / (e + 1)]), 8)
run("MultiplicativeLR", lambda o: S.MultiplicativeLR(o, lambda e: (e + 9) / (e + 10)), 8)
run("LinearLR", lambda o: S.LinearLR(o, start_factor=0.25, end_factor=0.75, total_iters=6), 9)
run("LinearLRDefaults", lambda o: S.LinearLR(o), 7)
run("ConstantLR", lambda o: S.ConstantLR(o, factor=0.5, total_iters=4), 7)
run("ConstantLRDefaults", lambda o: S.ConstantLR(o), 7)
run("CosineAnnealingLR", lambda o: S.CosineAnnealingLR(o, T_max=5, eta_min=0.001), 27)
# The Transformer's schedule (models/training/trainer.cpp, nn::WarmupInverseSqrtLR): update s = epoch + 1.
run("WarmupInverseSqrt", lambda o: S.LambdaLR(o, lambda e: min((e + 1) / 4, math.sqrt(4 / (e + 1)))), 12)
run("SequentialLR", lambda o: S.SequentialLR(o, [S.ConstantLR(o, factor=0.5, total_iters=2),
                                                 S.ExponentialLR(o, gamma=0.9),
                                                 S.CosineAnnealingLR(o, T_max=4, eta_min=0.01)], milestones=[3, 6]), 14)
run("WarmupCosine", lambda o: S.SequentialLR(o, [S.LinearLR(o, start_factor=0.1, total_iters=4),
                                                 S.CosineAnnealingLR(o, T_max=6)], milestones=[4]), 12)
# ReduceLROnPlateau: a row ends with num_bad_epochs, cooldown_counter and best.
plateau_extra = lambda s, o: [s.num_bad_epochs, s.cooldown_counter, s.best]
run("PlateauMinRel", lambda o: S.ReduceLROnPlateau(o, factor=0.5, patience=2, threshold=0.1, cooldown=1,
                                                   min_lr=[0.01, 0.004]),
    16, [1.0, 0.95, 0.85, 0.9, 0.9, 0.9, 0.9, 0.5, 0.46, 0.45, 0.45, 0.44, 0.2, 0.2, 0.2, 0.2], plateau_extra)
run("PlateauMaxAbs", lambda o: S.ReduceLROnPlateau(o, mode="max", factor=0.1, patience=0, threshold=0.05,
                                                   threshold_mode="abs", min_lr=[0.00095, 0.0005], eps=1e-4),
    8, [0.5, 0.54, 0.56, 0.7, 0.6, 0.74, 0.8, 0.1], plateau_extra)
# OneCycleLR (SGD with momentum 0.9): a row ends with each group's momentum.
momenta = lambda s, o: [g["momentum"] for g in o.param_groups]
run("OneCycleLR", lambda o: S.OneCycleLR(o, max_lr=[0.1, 0.05], total_steps=10), 10, extra=momenta)
run("OneCycleLRThreePhaseLinear", lambda o: S.OneCycleLR(o, max_lr=0.2, epochs=3, steps_per_epoch=4, pct_start=0.25,
                                                         anneal_strategy="linear", three_phase=True,
                                                         div_factor=10.0, final_div_factor=100.0), 12, extra=momenta)
