#!/usr/bin/python3
"""PyTorch reference trainer for issue 16's time-to-quality comparison: RNNsearch trained on exactly
the batches tapegrad trains on, validated as tapegrad validates, logged in tapegrad's CSV format.

    build/bin/bahdanau train ... --epochs 20 --write-batches out/ttq/batches    # the plan (no training)
    /usr/bin/python3 scripts/pytorch_rnnsearch.py --batches out/ttq/batches --out out/ttq/pytorch \\
        --max-minutes 140 --threads 1

What it takes from the export (`bahdanau train --write-batches DIR`, see its --help):
  batches.npz  the encoded training and dev rows (ids with <eos>, padded to num_steps) and the rows of
               every step's batch, in tapegrad's training order (epoch_batch_rows)
  meta.json    model sizes, dropout, lr, clip, validation and lr-decay settings, special ids
  init/        the initialised tapegrad model: by default its weights are loaded (--init export), so
               both frameworks start from the same parameters; --init torch uses PyTorch's own
               initialisation (the same scheme) with --seed
  dev.ref.txt  the dev BLEU references (the dev sentences as written)

One step, as models/training/trainer.cpp: the batch cut to its longest source and target rows,
teacher forcing (<bos> + target shifted right), mean cross-entropy over the valid target tokens
(the readout computed at those positions only), backward, clip_grad_norm_(clip), Adam(lr). The
attention dropout draws its own random numbers (they cannot match tapegrad's).
Validation at every epoch end, every validate_every steps and after the last step: the dev loss
(teacher-forced, eval mode, batches of 64 in file order, token-weighted) and the dev BLEU of greedy
translations of the first dev_bleu_pairs dev sources (batches of 64, at most num_steps tokens, stop
at <eos>), ids -> pieces through init/tgt_vocab.txt -> text through init/tokenizer.model
(python3-sentencepiece), scored by `bahdanau bleu --metric sacrebleu`. The best validation (highest
BLEU, ties by lower loss), patience and lr decay on a plateau follow tapegrad's rules.
elapsed_s is tapegrad's: wall time since the first step started, validations included; a row's
value is taken after its step and before that step's validation.

Outputs in --out: train.csv (step,epoch,loss,tokens,grad_norm,lr,elapsed_s,dev_loss,dev_bleu),
run.json (torch version, BLAS, threads, settings, validations, why it stopped) and dev.hyp.txt (the
last validation's translations).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batches", required=True, help="directory written by bahdanau train --write-batches")
    p.add_argument("--out", required=True, help="output directory (train.csv, run.json, dev.hyp.txt)")
    p.add_argument("--max-minutes", type=float, default=0.0,
                   help="stop once the training time (validations included) reaches this (0 = meta.json's max_minutes)")
    p.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0 = the whole plan)")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads and OPENBLAS_NUM_THREADS")
    p.add_argument("--init", choices=["export", "torch"], default="export",
                   help="initial weights: the exported tapegrad model's (default) or PyTorch's own with --seed")
    p.add_argument("--seed", type=int, default=1, help="torch.manual_seed (dropout masks; --init torch)")
    p.add_argument("--bahdanau", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "bin",
                                                      "bahdanau"), help="the bahdanau binary that scores BLEU")
    p.add_argument("--eval-only", action="store_true",
                   help="validate the initial model once (dev loss, dev BLEU), print it and stop")
    return p.parse_args()


ARGS = parse_args()
os.environ.setdefault("OMP_WAIT_POLICY", "passive")
os.environ.setdefault("OPENBLAS_NUM_THREADS", str(ARGS.threads))

import numpy as np  # noqa: E402
import sentencepiece as spm  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
from blas_in_use import blas_in_use  # noqa: E402
from rnnsearch_torch import RnnSearch  # noqa: E402


def fail(msg):
    sys.exit("pytorch_rnnsearch.py: error: " + msg)


def tapegrad_to_torch(name):
    """A tapegrad rnnsearch parameter name -> the RnnSearch module's."""
    for a, b in (("encoder.embedding.", "src_embedding."), ("encoder.rnn.", "encoder_rnn."),
                 ("decoder.attention.", ""), ("decoder.embedding.", "tgt_embedding."), ("decoder.", "")):
        if name.startswith(a):
            return b + name[len(a):]
    return name


def load_export(d):
    try:
        with open(os.path.join(d, "meta.json")) as f:
            meta = json.load(f)
    except OSError as e:
        fail(f"{d}/meta.json: {e.strerror} (write it with bahdanau train ... --write-batches {d})")
    if meta.get("format") != "tapegrad train --write-batches 1":
        fail(f"{d}/meta.json: not a bahdanau train --write-batches export (format {meta.get('format')!r})")
    unsupported = [(meta["model"] != "rnnsearch", "model " + meta["model"]),
                   (meta["attention"] != "additive", "attention " + meta["attention"]),
                   (meta["ablation"] != "none", "ablation " + meta["ablation"]),
                   (meta["warmup_steps"] > 0, "warmup_steps"), (meta["label_smoothing"] > 0, "label_smoothing"),
                   (meta.get("ema_decay", 0) > 0, "ema_decay"),
                   (meta["dev_beam"] > 1, "dev_beam > 1"), (not meta["padding_is_inert"], "padding that is read")]
    for bad, what in unsupported:
        if bad:
            fail(f"{d}/meta.json: {what} is not reproduced here (rnnsearch, additive attention, greedy dev BLEU only)")
    arrays = np.load(os.path.join(d, "batches.npz"))
    data = {k: torch.from_numpy(arrays[k].astype(np.int64)) for k in arrays.files}
    with open(os.path.join(d, "init", "tgt_vocab.txt"), encoding="utf-8") as f:
        tgt_pieces = f.read().split("\n")[:-1]
    if len(tgt_pieces) != meta["tgt_vocab"]:
        fail(f"{d}/init/tgt_vocab.txt: {len(tgt_pieces)} pieces, meta.json says {meta['tgt_vocab']}")
    refs = []
    if "dev_src" in data:
        with open(os.path.join(d, "dev.ref.txt"), encoding="utf-8") as f:
            refs = f.read().split("\n")[:-1]
    return meta, data, tgt_pieces, refs


def trimmed(src, src_len, tgt, tgt_len):
    """tapegrad's trim_padding: columns past the longest valid row hold only <pad>."""
    return src[:, :max(1, int(src_len.max()))], tgt[:, :max(1, int(tgt_len.max()))]


def batch_loss(model, src, src_len, tgt, tgt_len, bos):
    """sequence_loss with the readout at the valid target positions only (loss_at_valid_positions)."""
    dec_input = torch.cat((torch.full((tgt.size(0), 1), bos, dtype=torch.long), tgt[:, :-1]), dim=1)
    feats = model.features(src, src_len, dec_input)
    valid = torch.arange(tgt.size(1))[None, :] < tgt_len[:, None]
    return nn.functional.cross_entropy(model.readout(feats[valid]), tgt[valid])


@torch.no_grad()
def dev_loss(model, data, meta):
    was = model.training
    model.eval()
    total, tokens = 0.0, 0
    n = data["dev_src"].size(0)
    for b in range(0, n, 64):
        sl, tl = data["dev_src_valid_len"][b:b + 64], data["dev_tgt_valid_len"][b:b + 64]
        src, tgt = trimmed(data["dev_src"][b:b + 64], sl, data["dev_tgt"][b:b + 64], tl)
        k = int(tl.sum())
        if k == 0:
            continue
        total += float(batch_loss(model, src, sl, tgt, tl, meta["bos"])) * k
        tokens += k
    model.train(was)
    return total / tokens if tokens else float("nan")


@torch.no_grad()
def greedy(model, src, src_len, max_steps, bos, eos):
    """tapegrad's greedy_decode: from <bos>, the arg-max token each step, a row stops at <eos> (not
    kept) or after max_steps tokens."""
    state = model.begin(src, src_len)
    B = src.size(0)
    y = torch.full((B,), bos, dtype=torch.long)
    out = [[] for _ in range(B)]
    done = [False] * B
    for _ in range(max_steps):
        logits, state = model.step(y, state)
        y = logits.argmax(dim=-1)
        for b, t in enumerate(y.tolist()):
            if done[b]:
                continue
            if t == eos:
                done[b] = True
            else:
                out[b].append(t)
        if all(done):
            break
    return out


def sacrebleu(bahdanau, hyps, refs):
    with tempfile.TemporaryDirectory() as tmp:
        h, r = os.path.join(tmp, "hyp.txt"), os.path.join(tmp, "ref.txt")
        with open(h, "w", encoding="utf-8") as f:
            f.write("".join(x + "\n" for x in hyps))
        with open(r, "w", encoding="utf-8") as f:
            f.write("".join(x + "\n" for x in refs))
        res = subprocess.run([bahdanau, "bleu", "--hyp", h, "--ref", r, "--metric", "sacrebleu"],
                             capture_output=True, text=True)
    if res.returncode != 0 or " = " not in res.stdout:
        fail(f"{bahdanau} bleu failed (status {res.returncode}): {res.stderr.strip() or res.stdout.strip()}")
    return float(res.stdout.split(" = ", 1)[1].split()[0])


def dev_bleu(model, data, meta, pieces, sp, refs, bahdanau):
    was = model.training
    model.eval()
    n = min(meta["dev_bleu_pairs"] or len(refs), len(refs))
    hyps = []
    for b in range(0, n, 64):
        e = min(n, b + 64)
        sl = data["dev_src_valid_len"][b:e]
        src = data["dev_src"][b:e, :max(1, int(sl.max()))]
        for ids in greedy(model, src, sl, meta["dev_max_steps"], meta["bos"], meta["eos"]):
            hyps.append(sp.DecodePieces([pieces[i] for i in ids]))
    model.train(was)
    return sacrebleu(bahdanau, hyps, refs[:n]), hyps


def main():
    a = ARGS
    meta, data, pieces, refs = load_export(a.batches)
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    sp = spm.SentencePieceProcessor(model_file=os.path.join(a.batches, "init", "tokenizer.model"))
    for key in ("embedding_dropout", "readout_dropout"):
        if meta.get(key, 0.0) != 0.0:
            fail(f"{key} = {meta[key]}: this reference implements only the attention dropout")
    model = RnnSearch(dict(src_vocab=meta["src_vocab"], tgt_vocab=meta["tgt_vocab"], embed=meta["embed_size"],
                           hidden=meta["num_hiddens"], dropout=meta["dropout"], readout=meta["readout"],
                           maxout_units=meta["maxout_units"]))
    n_params = sum(p.numel() for p in model.parameters())
    if n_params != meta["num_parameters"]:
        fail(f"the PyTorch model has {n_params} parameters, the tapegrad model {meta['num_parameters']}")
    if a.init == "export":
        weights = np.load(os.path.join(a.batches, "init", "weights.npz"))
        state = {tapegrad_to_torch(k): torch.from_numpy(weights[k]) for k in weights.files}
        own = model.state_dict()
        if set(state) != set(own):
            fail(f"init/weights.npz names do not map onto the PyTorch model: {sorted(set(state) ^ set(own))}")
        for k, v in state.items():
            if tuple(v.shape) != tuple(own[k].shape):
                fail(f"init/weights.npz: {k} has shape {tuple(v.shape)}, the PyTorch model {tuple(own[k].shape)}")
        model.load_state_dict(state)
    bahdanau = os.path.abspath(a.bahdanau)
    have_dev = "dev_src" in data
    os.makedirs(a.out, exist_ok=True)
    info = dict(framework="pytorch", torch_version=torch.__version__, blas=blas_in_use(),
                threads=torch.get_num_threads(), openblas_threads=os.environ.get("OPENBLAS_NUM_THREADS"),
                omp_wait_policy=os.environ.get("OMP_WAIT_POLICY"), batches=os.path.abspath(a.batches),
                init=a.init, seed=a.seed, parameters=n_params, meta=meta, command=sys.argv)
    print(f"pytorch_rnnsearch.py: torch {torch.__version__} on {info['blas']}, {info['threads']} threads, "
          f"{n_params} parameters, {meta['plan_steps']} planned steps ({meta['plan_epochs']} epochs)", file=sys.stderr)

    if a.eval_only:
        if not have_dev:
            fail("--eval-only needs an export with a dev set")
        loss = dev_loss(model, data, meta)
        bleu, _ = dev_bleu(model, data, meta, pieces, sp, refs, bahdanau)
        print(json.dumps(dict(dev_loss=loss, dev_bleu=bleu, init=a.init)))
        return

    max_seconds = 60.0 * (a.max_minutes or meta.get("max_minutes", 0.0))
    steps = meta["plan_steps"] if a.max_steps <= 0 else min(a.max_steps, meta["plan_steps"])
    lr0, clip = meta["lr"], meta["clip"] if meta["clip"] > 0 else float("inf")
    opt = torch.optim.Adam(model.parameters(), lr=lr0)
    params = [p for p in model.parameters()]
    rows, offsets, epochs = data["plan_rows"], data["plan_offsets"].tolist(), data["plan_epoch"].tolist()
    t_src, t_sl, t_tgt, t_tl = data["train_src"], data["train_src_valid_len"], data["train_tgt"], data["train_tgt_valid_len"]

    best = dict(step=0, bleu=0.0, loss=float("inf"))
    bad = lr_bad = 0
    lr_scale = 1.0
    validations = []
    stop = "plan exhausted"
    csv = open(os.path.join(a.out, "train.csv"), "w")
    csv.write("step,epoch,loss,tokens,grad_norm,lr,elapsed_s" + (",dev_loss,dev_bleu" if have_dev else "") + "\n")
    model.train()
    t0 = time.perf_counter()
    for k in range(steps):
        r = rows[offsets[k]:offsets[k + 1]]
        sl, tl = t_sl[r], t_tl[r]
        src, tgt = trimmed(t_src[r], sl, t_tgt[r], tl)
        loss = batch_loss(model, src, sl, tgt, tl, meta["bos"])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = float(nn.utils.clip_grad_norm_(params, clip))
        lr = opt.param_groups[0]["lr"]
        opt.step()
        step = k + 1
        elapsed = time.perf_counter() - t0
        loss_value = float(loss)
        if loss_value != loss_value or abs(loss_value) == float("inf"):
            fail(f"the loss became {loss_value} at step {step}")
        epoch_done = step == len(epochs) or epochs[k + 1] != epochs[k]
        out_of_time = max_seconds > 0 and elapsed >= max_seconds
        stopped_early = have_dev and meta["patience"] > 0 and bad >= meta["patience"]
        finished = step == steps or out_of_time or stopped_early
        row = f"{step},{epochs[k]},{loss_value:.9g},{int(tl.sum())},{grad_norm:.17g},{lr:.9g},{elapsed:.3f}"
        if have_dev:
            ve = meta["validate_every"]
            if epoch_done or finished or (ve > 0 and step % ve == 0):
                v0 = time.perf_counter()
                dl = dev_loss(model, data, meta)
                bleu, hyps = dev_bleu(model, data, meta, pieces, sp, refs, bahdanau)
                is_best = best["step"] == 0 or (dl < best["loss"] if meta["select_by"] == "loss" else
                                                 bleu > best["bleu"] or (bleu == best["bleu"] and dl < best["loss"]))
                decayed = False
                if is_best:
                    best = dict(step=step, bleu=bleu, loss=dl)
                    bad = lr_bad = 0
                else:
                    bad += 1
                    lr_bad += 1
                    if meta["lr_decay"] < 1 and lr_bad >= meta["lr_patience"]:
                        lr_scale *= meta["lr_decay"]
                        for g in opt.param_groups:
                            g["lr"] = lr0 * lr_scale
                        lr_bad = 0
                        decayed = True
                with open(os.path.join(a.out, "dev.hyp.txt"), "w", encoding="utf-8") as f:
                    f.write("".join(h + "\n" for h in hyps))
                seconds = time.perf_counter() - v0
                validations.append(dict(step=step, epoch=epochs[k], elapsed_s=elapsed, dev_loss=dl, dev_bleu=bleu,
                                        best=is_best, lr=opt.param_groups[0]["lr"], seconds=seconds))
                print(f"validation at step {step} (epoch {epochs[k]}, {elapsed / 60:.1f} min): dev loss {dl:.4f}, "
                      f"dev BLEU {bleu:.2f}, {seconds:.1f} s{', best so far' if is_best else ''}"
                      f"{', lr decayed' if decayed else ''}", file=sys.stderr, flush=True)
                row += f",{dl:.9g},{bleu:.4f}"
                if meta["patience"] > 0 and bad >= meta["patience"]:
                    finished, stop = True, "early stop (patience)"
            else:
                row += ",,"
        csv.write(row + "\n")
        csv.flush()
        if out_of_time:
            stop = "time limit"
        if finished:
            if step == steps and stop == "plan exhausted" and steps < meta["plan_steps"]:
                stop = "max steps"
            break
    csv.close()
    info.update(steps=step, elapsed_s=time.perf_counter() - t0, stopped=stop, best=best, lr_scale=lr_scale,
                validations=validations)
    with open(os.path.join(a.out, "run.json"), "w") as f:
        json.dump(info, f, indent=1)
    print(f"pytorch_rnnsearch.py: {step} steps in {info['elapsed_s']:.1f} s ({stop}); best dev BLEU {best['bleu']:.2f} "
          f"at step {best['step']}; wrote {a.out}/train.csv, run.json", file=sys.stderr)


if __name__ == "__main__":
    main()
