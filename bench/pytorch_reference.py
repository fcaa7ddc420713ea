#!/usr/bin/python3
"""PyTorch reference for bench_seq2seq (issues 6, 15): the same workloads, data, step and JSON keys.

    OMP_WAIT_POLICY=passive OPENBLAS_NUM_THREADS=2 /usr/bin/python3 bench/pytorch_reference.py \
        --config A|B|C|T [--readout linear|maxout] [--threads N] [--steps N] [--warmup N] [--seed S] [--profile]
        [--precision f32|bf16]

Run with Debian's python3-torch 1.13 (/usr/bin/python3). --threads N calls torch.set_num_threads(N);
OpenBLAS ignores that, so OPENBLAS_NUM_THREADS (and OMP_WAIT_POLICY=passive, without which two
threads run several times slower) must be in the environment before torch is imported: the script
sets both from --threads if they are missing, and bench/compare sets them explicitly.

Workloads:
  A: d2l's Bahdanau chapter model (d2l 0.17's classes, bench/d2l_torch.py),
     embed 32, hidden 32, 2 layers, dropout 0.1, batch 64, num_steps 10, vocab 184 / 201.
  B: RNNsearch (bench/rnnsearch_torch.py, which mirrors models/translators/rnnsearch_model.cpp),
     embed 256, hidden 256, batch 64, num_steps 20, vocab 8000 / 8000, linear readout, no dropout.
  C: RNNsearch, embed 620, hidden 1000, batch 80, num_steps 30, vocab 30000, linear or maxout.
  T: Transformer written as PyTorch's tutorial "Language Translation with nn.Transformer"
     (Seq2SeqTransformer: TokenEmbedding * sqrt(d), sinusoidal PositionalEncoding with dropout,
     nn.Transformer post-LN, Linear generator; masks from create_mask; CrossEntropyLoss with
     ignore_index=PAD; Adam(lr 1e-4, betas (0.9, 0.98), eps 1e-9); greedy decoding recomputes the
     decoder over the whole prefix each step, as the tutorial's greedy_decode, batched), with
     batch_first=True; d_model 256, 4 heads, ff 1024, 3 + 3 layers, dropout 0.1, batch 64,
     lengths 20-40 (num_steps 40), vocab 8000 / 8000. Initialisation: the tutorial's
     xavier_uniform_ on every matrix, except the embeddings (normal, std d^-1/2) and the generator
     (nn.Linear's default), which follow tapegrad's transformer model
     (models/translators/transformer_model.cpp). nn.Transformer always has final LayerNorms on
     both stacks; tapegrad's post-LN model has none (after a post-LN layer's own LayerNorm they
     change nothing at initialisation).
Data: splitmix64 draws exactly the batches bench_seq2seq draws for the same seed. One step =
teacher-forced forward, mean cross-entropy over valid target tokens, backward,
clip_grad_norm_(1.0), Adam(lr 0.005; T as above). Decoding (on the fresh model, before training):
greedy, eval mode, no grad, stops when every row has produced <eos> or after num_steps steps (the
rule of tapegrad's greedy_decode); decode_batch*_avg_steps = mean decoding steps per sentence.

--precision bf16 (issue 39) runs as the PyTorch documentation's autocast recipe: each training step's
forward and loss inside torch.autocast("cpu", dtype=torch.bfloat16) (bench/reference_context.py), the
backward, the clipping and Adam outside it (the backward runs in the dtypes autocast chose in the
forward); each greedy decoding call inside its own autocast context. Autocast runs the products
(linear, matmul, bmm; the GRUs' projections through linear) in bf16 on oneDNN and keeps the
cross-entropy in float32; parameters, gradients and Adam stay float32. The record names the
precision and the dtype of the first step's logits ("logits_dtype": torch.bfloat16 shows autocast
took effect), the CPU, the OpenBLAS core type taken and the OPENBLAS_* settings (fp32 products go to
OpenBLAS).
"""
import argparse
import json
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_context import autocast, fields, precision_arg  # noqa: E402

PAD, BOS, EOS, FIRST_WORD = 1, 2, 3, 4
MASK64 = (1 << 64) - 1

WORKLOADS = {
    "A": dict(model="d2l", src_vocab=184, tgt_vocab=201, embed=32, hidden=32, layers=2, dropout=0.1,
              batch=64, num_steps=10, readout="linear", steps=100, warmup=10, decode_min_time=1.0),
    "B": dict(model="rnnsearch", src_vocab=8000, tgt_vocab=8000, embed=256, hidden=256, layers=1, dropout=0.0,
              batch=64, num_steps=20, readout="linear", steps=10, warmup=2, decode_min_time=1.0),
    "C": dict(model="rnnsearch", src_vocab=30000, tgt_vocab=30000, embed=620, hidden=1000, layers=1, dropout=0.0,
              batch=80, num_steps=30, readout="linear", steps=3, warmup=1, decode_min_time=0.0,
              zero_grad_before_forward=True),
    "T": dict(model="transformer", src_vocab=8000, tgt_vocab=8000, embed=256, hidden=1024, layers=3, heads=4,
              dropout=0.1, batch=64, num_steps=40, min_len=20, readout="linear", steps=3, warmup=1,
              decode_min_time=1.0, lr=1e-4, betas=(0.9, 0.98), eps=1e-9),
}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", choices=["A", "B", "C", "T"], default="A")
    p.add_argument("--readout", choices=["linear", "maxout"], default=None)
    p.add_argument("--threads", type=int, default=0, help="0 = all cores")
    p.add_argument("--steps", type=int, default=-1)
    p.add_argument("--warmup", type=int, default=-1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--no-decode", action="store_true")
    p.add_argument("--precision", type=precision_arg, default="f32", help="f32 (or fp32), or bf16: torch.autocast")
    return p.parse_args()


ARGS = parse_args()
THREADS = ARGS.threads if ARGS.threads > 0 else (os.cpu_count() or 1)
os.environ.setdefault("OMP_WAIT_POLICY", "passive")
os.environ.setdefault("OPENBLAS_NUM_THREADS", str(THREADS))

import math  # noqa: E402
import torch  # noqa: E402  (after the environment is set)
from torch import nn  # noqa: E402

from blas_in_use import blas_in_use  # noqa: E402
from d2l_torch import Seq2SeqAttentionDecoder, Seq2SeqEncoder  # noqa: E402
from rnnsearch_torch import RnnSearch  # noqa: E402


# ----------------------------------------------------------------------------- data
class SplitMix64:
    def __init__(self, seed):
        self.state = seed & MASK64

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def below(self, n):
        return self.next() % n


def fill_row(rng, n, vocab, min_len=3):
    length = min_len + rng.below(n - min_len + 1)
    row = [FIRST_WORD + rng.below(vocab - FIRST_WORD) for _ in range(length - 1)] + [EOS] + [PAD] * (n - length)
    return row, length


def make_batch(rng, B, w):
    src, tgt, src_len, tgt_len = [], [], [], []
    for _ in range(B):
        r, l = fill_row(rng, w["num_steps"], w["src_vocab"], w.get("min_len", 3))
        src.append(r)
        src_len.append(l)
        r, l = fill_row(rng, w["num_steps"], w["tgt_vocab"], w.get("min_len", 3))
        tgt.append(r)
        tgt_len.append(l)
    return (torch.tensor(src, dtype=torch.long), torch.tensor(src_len, dtype=torch.long),
            torch.tensor(tgt, dtype=torch.long), torch.tensor(tgt_len, dtype=torch.long), sum(tgt_len))


# ----------------------------------------------------------------------------- d2l (A)
class D2lEncoderDecoder(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.encoder = Seq2SeqEncoder(w["src_vocab"], w["embed"], w["hidden"], w["layers"], w["dropout"])
        self.decoder = Seq2SeqAttentionDecoder(w["tgt_vocab"], w["embed"], w["hidden"], w["layers"], w["dropout"])

    def forward(self, enc_X, enc_valid_len, dec_X):
        dec_state = self.decoder.init_state(self.encoder(enc_X, enc_valid_len), enc_valid_len)
        return self.decoder(dec_X, dec_state)[0]

    def begin(self, enc_X, enc_valid_len):
        return self.decoder.init_state(self.encoder(enc_X, enc_valid_len), enc_valid_len)

    def step(self, y_prev, state):
        Y, state = self.decoder(y_prev.unsqueeze(1), state)
        return Y.squeeze(1), state


# ----------------------------------------------------------------------------- Transformer (T)
# The tutorial's classes (https://pytorch.org/tutorials/beginner/translation_transformer.html),
# batch first.
class PositionalEncoding(nn.Module):
    def __init__(self, emb_size, dropout, maxlen=5000):
        super().__init__()
        den = torch.exp(- torch.arange(0, emb_size, 2) * math.log(10000) / emb_size)
        pos = torch.arange(0, maxlen).reshape(maxlen, 1)
        pos_embedding = torch.zeros((maxlen, emb_size))
        pos_embedding[:, 0::2] = torch.sin(pos * den)
        pos_embedding[:, 1::2] = torch.cos(pos * den)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("pos_embedding", pos_embedding.unsqueeze(0))   # (1, maxlen, E)

    def forward(self, token_embedding):
        return self.dropout(token_embedding + self.pos_embedding[:, :token_embedding.size(1)])


class TokenEmbedding(nn.Module):
    def __init__(self, vocab_size, emb_size):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb_size)
        self.emb_size = emb_size

    def forward(self, tokens):
        return self.embedding(tokens.long()) * math.sqrt(self.emb_size)


def generate_square_subsequent_mask(sz):
    mask = (torch.triu(torch.ones((sz, sz))) == 1).transpose(0, 1)
    return mask.float().masked_fill(mask == 0, float("-inf")).masked_fill(mask == 1, float(0.0))


def create_mask(src, tgt):
    src_seq_len, tgt_seq_len = src.shape[1], tgt.shape[1]
    tgt_mask = generate_square_subsequent_mask(tgt_seq_len)
    src_mask = torch.zeros((src_seq_len, src_seq_len)).type(torch.bool)
    return src_mask, tgt_mask, src == PAD, tgt == PAD


class Seq2SeqTransformer(nn.Module):
    def __init__(self, w):
        super().__init__()
        E = w["embed"]
        self.transformer = nn.Transformer(d_model=E, nhead=w["heads"], num_encoder_layers=w["layers"],
                                          num_decoder_layers=w["layers"], dim_feedforward=w["hidden"],
                                          dropout=w["dropout"], batch_first=True)
        self.generator = nn.Linear(E, w["tgt_vocab"])
        self.src_tok_emb = TokenEmbedding(w["src_vocab"], E)
        self.tgt_tok_emb = TokenEmbedding(w["tgt_vocab"], E)
        self.positional_encoding = PositionalEncoding(E, dropout=w["dropout"])
        for p in self.parameters():   # the tutorial's initialisation
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        # tapegrad's scheme for the embeddings and the generator (see the docstring).
        for emb in (self.src_tok_emb.embedding, self.tgt_tok_emb.embedding):
            nn.init.normal_(emb.weight, 0.0, E ** -0.5)
        self.generator.reset_parameters()

    def forward(self, src, src_len, trg):
        src_mask, tgt_mask, src_padding_mask, tgt_padding_mask = create_mask(src, trg)
        src_emb = self.positional_encoding(self.src_tok_emb(src))
        tgt_emb = self.positional_encoding(self.tgt_tok_emb(trg))
        outs = self.transformer(src_emb, tgt_emb, src_mask, tgt_mask, None,
                                src_padding_mask, tgt_padding_mask, src_padding_mask)
        return self.generator(outs)

    def encode(self, src, src_mask, src_padding_mask):
        return self.transformer.encoder(self.positional_encoding(self.src_tok_emb(src)), src_mask, src_padding_mask)

    def decode(self, tgt, memory, tgt_mask, memory_padding_mask):
        return self.transformer.decoder(self.positional_encoding(self.tgt_tok_emb(tgt)), memory, tgt_mask,
                                        memory_key_padding_mask=memory_padding_mask)

    def loss(self, logits, tgt, tgt_len):
        """The tutorial's CrossEntropyLoss(ignore_index=PAD): the mean over valid target tokens."""
        return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), ignore_index=PAD)

    @torch.no_grad()
    def greedy_decode(self, src, src_len, max_steps):
        """The tutorial's greedy_decode, batched: the decoder reruns over the whole prefix each step.
        Sources carry their padding, so the padding mask goes to the encoder and the cross-attention."""
        was_training = self.training
        self.eval()
        src_mask = torch.zeros((src.size(1), src.size(1))).type(torch.bool)
        src_padding_mask = src == PAD
        memory = self.encode(src, src_mask, src_padding_mask)
        B = src.size(0)
        ys = torch.full((B, 1), BOS, dtype=torch.long)
        ended = torch.zeros(B, dtype=torch.bool)
        log_prob = torch.zeros(B)
        for _ in range(max_steps):
            tgt_mask = generate_square_subsequent_mask(ys.size(1)).type(torch.bool)
            out = self.decode(ys, memory, tgt_mask, src_padding_mask)
            lp = torch.log_softmax(self.generator(out[:, -1]), dim=-1)
            y = lp.argmax(dim=-1)
            log_prob += torch.where(ended, torch.zeros(B), lp.gather(1, y[:, None]).squeeze(1))
            ys = torch.cat([ys, y[:, None]], dim=1)
            ended |= y == EOS
            if bool(ended.all()):
                break
        self.train(was_training)
        return ys[:, 1:], log_prob


# ----------------------------------------------------------------------------- step, decode
def sequence_loss(logits, target, valid_len):
    """Mean cross-entropy over the valid target tokens (models/translators/seq2seq.h sequence_loss)."""
    B, T, V = logits.shape
    ce = nn.functional.cross_entropy(logits.reshape(B * T, V), target.reshape(B * T), reduction="none")
    mask = (torch.arange(T)[None, :] < valid_len[:, None]).reshape(-1).to(ce.dtype)
    return (ce * mask).sum() / mask.sum()


def teacher_forcing_input(tgt):
    bos = torch.full((tgt.size(0), 1), BOS, dtype=torch.long)
    return torch.cat((bos, tgt[:, :-1]), dim=1)


@torch.no_grad()
def greedy_decode(model, src, src_len, max_steps):
    was_training = model.training
    model.eval()
    state = model.begin(src, src_len)
    B = src.size(0)
    y = torch.full((B,), BOS, dtype=torch.long)
    ended = torch.zeros(B, dtype=torch.bool)
    log_prob = torch.zeros(B)
    out = []
    for _ in range(max_steps):
        logits, state = model.step(y, state)
        lp = torch.log_softmax(logits, dim=-1)
        y = lp.argmax(dim=-1)
        log_prob += torch.where(ended, torch.zeros(B), lp.gather(1, y[:, None]).squeeze(1))
        out.append(y)
        ended |= y == EOS
        if bool(ended.all()):
            break
    model.train(was_training)
    return torch.stack(out, 1), log_prob


def cpu_seconds():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def decode_steps(tokens):
    """Total decoding steps of a (B, steps) output: up to and including the first <eos>, else all."""
    total = 0
    for row in tokens.tolist():
        total += row.index(EOS) + 1 if EOS in row else len(row)
    return total


def main():
    a = ARGS
    w = dict(WORKLOADS[a.config])
    if a.readout is not None:
        if w["model"] != "rnnsearch":
            sys.exit("--readout applies to B and C only")
        w["readout"] = a.readout
    steps = a.steps if a.steps >= 0 else w["steps"]
    warmup = a.warmup if a.warmup >= 0 else w["warmup"]
    torch.set_num_threads(THREADS)
    torch.manual_seed(a.seed)
    model = {"d2l": D2lEncoderDecoder, "rnnsearch": RnnSearch, "transformer": Seq2SeqTransformer}[w["model"]](w)
    opt = torch.optim.Adam(model.parameters(), lr=w.get("lr", 0.005), betas=w.get("betas", (0.9, 0.999)),
                           eps=w.get("eps", 1e-8))
    decode_fp32 = model.greedy_decode if hasattr(model, "greedy_decode") else (
        lambda s, l, n: greedy_decode(model, s, l, n))

    def decode(s, l, n):
        with autocast(a.precision):
            return decode_fp32(s, l, n)
    seq_loss = model.loss if hasattr(model, "loss") else sequence_loss
    rng = SplitMix64(a.seed * 0x632BE59BD9B4E019 + 12345)
    batches = [make_batch(rng, w["batch"], w) for _ in range(warmup + steps)]

    # Decoding first, on the freshly initialised model (see bench_seq2seq.cpp: an untrained model
    # rarely picks <eos>, so nearly every sentence runs num_steps steps in both frameworks).
    dec1 = dec64 = dec1_len = dec64_len = 0.0
    if not a.no_decode:
        src, src_len = batches[-1][0], batches[-1][1]
        B, T = src.size(0), w["num_steps"]
        decode(src[:1], src_len[:1], T)  # warm-up
        n, steps_run, t0 = 0, 0, time.perf_counter()
        while True:
            r = n % B
            steps_run += decode_steps(decode(src[r:r + 1], src_len[r:r + 1], T)[0])
            n += 1
            if time.perf_counter() - t0 >= w["decode_min_time"] and n >= 4:
                break
        dec1 = n / (time.perf_counter() - t0)
        dec1_len = steps_run / n
        full, full_len = src[:64], src_len[:64]
        decode(full, full_len, T)  # warm-up
        n, steps_run, t0 = 0, 0, time.perf_counter()
        while True:
            steps_run += decode_steps(decode(full, full_len, T)[0])
            n += full.size(0)
            if time.perf_counter() - t0 >= w["decode_min_time"]:
                break
        dec64 = n / (time.perf_counter() - t0)
        dec64_len = steps_run / n

    model.train()
    prof = dict(forward=0.0, loss=0.0, backward=0.0, clip=0.0, adam=0.0)
    tokens, first_loss, last_loss, start, cpu_start = 0, None, 0.0, time.perf_counter(), cpu_seconds()
    logits_dtype = None
    for i, (src, src_len, tgt, tgt_len, ntok) in enumerate(batches):
        if i == warmup:
            start, cpu_start = time.perf_counter(), cpu_seconds()
        t0 = time.perf_counter()
        # Where the previous step's gradients go, as in bench_seq2seq (bench/workloads.h): before
        # the forward for C, just before backward for A and B.
        if w.get("zero_grad_before_forward"):
            opt.zero_grad(set_to_none=True)
        with autocast(a.precision):
            logits = model(src, src_len, teacher_forcing_input(tgt))
            t1 = time.perf_counter()
            loss = seq_loss(logits, tgt, tgt_len)
            t2 = time.perf_counter()
        if logits_dtype is None:
            logits_dtype = str(logits.dtype)
        if not w.get("zero_grad_before_forward"):
            opt.zero_grad(set_to_none=True)
        loss.backward()
        t3 = time.perf_counter()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        t4 = time.perf_counter()
        opt.step()
        t5 = time.perf_counter()
        last_loss = float(loss)
        if first_loss is None:
            first_loss = last_loss
        if i >= warmup:
            tokens += ntok
            for k, d in zip(prof, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4)):
                prof[k] += d
    train_s = time.perf_counter() - start
    train_cpu_s = cpu_seconds() - cpu_start

    rec = dict(framework="pytorch", torch_version=torch.__version__, config=a.config, model=w["model"],
               readout=w["readout"], threads=torch.get_num_threads(), blas=blas_in_use(),
               openblas_threads=os.environ.get("OPENBLAS_NUM_THREADS"),
               omp_wait_policy=os.environ.get("OMP_WAIT_POLICY"), steps=steps, warmup=warmup,
               batch=w["batch"], num_steps=w["num_steps"], tokens=tokens,
               tokens_per_sec=tokens / train_s, sec_per_step=train_s / steps,
               cpu_sec_per_step=train_cpu_s / steps, loss_first=first_loss, loss_last=last_loss,
               decode_batch1_sents_per_sec=dec1, decode_batch64_sents_per_sec=dec64,
               decode_batch1_avg_steps=dec1_len, decode_batch64_avg_steps=dec64_len,
               peak_rss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
               zero_grad_before_forward=bool(w.get("zero_grad_before_forward")), logits_dtype=logits_dtype,
               loss_dtype=str(loss.dtype), **fields(a.precision))
    if a.profile:
        rec["profile_s"] = prof
    print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()
