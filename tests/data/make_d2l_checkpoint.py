#!/usr/bin/python3
"""Writes a checkpoint of d2l's Bahdanau model from PyTorch, for tests/models/test_torch_checkpoint.cpp.

Run by hand with Debian's python3-torch (the test itself does not need PyTorch):
    /usr/bin/python3 tests/data/make_d2l_checkpoint.py
Outputs tests/data/d2l_torch_ckpt/ (config.json, weights.npz, src_vocab.txt, tgt_vocab.txt: the
tapegrad checkpoint layout) and tests/data/d2l_torch_expected.npz (inputs, float64 logits and
d2l's predict_seq2seq greedy outputs computed with the float32-rounded weights).
The model classes are d2l's (0.17, PyTorch), from bench/d2l_torch.py.
"""
import json
import os

import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
from d2l_torch import EncoderDecoder, Seq2SeqAttentionDecoder, Seq2SeqEncoder  # noqa: E402


def truncate_pad(line, num_steps, padding_token):
    if len(line) > num_steps:
        return line[:num_steps]
    return line + [padding_token] * (num_steps - len(line))


SRC = ["<unk>", "<pad>", "<bos>", "<eos>", "go", ".", "i", "lost", "he's", "calm", "i'm", "home", "!"]
TGT = ["<unk>", "<pad>", "<bos>", "<eos>", "va", "!", "j'ai", "perdu", ".", "il", "est", "calme", "je",
       "suis", "chez", "moi"]
EMBED, HIDDENS, LAYERS, DROPOUT, NUM_STEPS = 8, 16, 2, 0.1, 10
SENTENCES = ["go .", "i lost .", "he's calm .", "i'm home .", "go home !"]


def predict(net, sentence):
    """d2l's predict_seq2seq (greedy)."""
    src_tokens = [SRC.index(t) if t in SRC else 0 for t in sentence.lower().split(' ')] + [SRC.index("<eos>")]
    enc_valid_len = torch.tensor([len(src_tokens)])
    src_tokens = truncate_pad(src_tokens, NUM_STEPS, SRC.index("<pad>"))
    enc_X = torch.unsqueeze(torch.tensor(src_tokens, dtype=torch.long), dim=0)
    dec_state = net.decoder.init_state(net.encoder(enc_X, enc_valid_len), enc_valid_len)
    dec_X = torch.unsqueeze(torch.tensor([TGT.index("<bos>")], dtype=torch.long), dim=0)
    out = []
    for _ in range(NUM_STEPS):
        Y, dec_state = net.decoder(dec_X, dec_state)
        dec_X = Y.argmax(dim=2)
        pred = dec_X.squeeze(dim=0).type(torch.int32).item()
        if pred == TGT.index("<eos>"):
            break
        out.append(pred)
    return out


def main():
    torch.manual_seed(7)
    net = EncoderDecoder(Seq2SeqEncoder(len(SRC), EMBED, HIDDENS, LAYERS, DROPOUT),
                         Seq2SeqAttentionDecoder(len(TGT), EMBED, HIDDENS, LAYERS, DROPOUT))
    # Larger weights than the default init make the untrained model's outputs far from ties.
    with torch.no_grad():
        for p in net.parameters():
            p.mul_(3.0)
    ckpt = os.path.join(HERE, "d2l_torch_ckpt")
    os.makedirs(ckpt, exist_ok=True)
    state = {k: v.detach().numpy().astype(np.float32) for k, v in net.state_dict().items()}
    np.savez(os.path.join(ckpt, "weights.npz"), **state)
    with open(os.path.join(ckpt, "config.json"), "w") as f:
        json.dump({"model": "d2l", "src_vocab": len(SRC), "tgt_vocab": len(TGT), "embed_size": EMBED,
                   "num_hiddens": HIDDENS, "num_layers": LAYERS, "dropout": DROPOUT, "num_steps": NUM_STEPS},
                  f, indent=2)
    for name, vocab in (("src_vocab.txt", SRC), ("tgt_vocab.txt", TGT)):
        with open(os.path.join(ckpt, name), "w") as f:
            f.write("\n".join(vocab) + "\n")

    # Expected values in float64 with exactly the float32 weights written above.
    net = net.double()
    net.load_state_dict({k: torch.from_numpy(v.astype(np.float64)) for k, v in state.items()})
    net.eval()
    src = torch.tensor([[4, 5, 3, 1, 1, 1, 1, 1, 1, 1], [6, 7, 5, 3, 1, 1, 1, 1, 1, 1],
                        [10, 11, 12, 5, 3, 1, 1, 1, 1, 1]], dtype=torch.long)
    src_len = torch.tensor([3, 4, 5])
    dec_in = torch.tensor([[2, 4, 5, 3, 1, 1, 1, 1, 1, 1], [2, 6, 7, 8, 3, 1, 1, 1, 1, 1],
                           [2, 12, 13, 14, 15, 8, 3, 1, 1, 1]], dtype=torch.long)
    with torch.no_grad():
        logits, _ = net(src, dec_in, src_len)
        attention = torch.cat(net.decoder._attention_weights, dim=1)  # (B, T, S)
        greedy = [predict(net, s) for s in SENTENCES]
    out = {"src": src.numpy(), "src_valid_len": src_len.numpy(), "dec_input": dec_in.numpy(),
           "logits": logits.numpy(), "attention": attention.numpy()}
    for i, g in enumerate(greedy):
        out[f"greedy_{i}"] = np.array(g, dtype=np.int64)
    np.savez(os.path.join(HERE, "d2l_torch_expected.npz"), **out)
    for s, g in zip(SENTENCES, greedy):
        print(f"{s!r} -> {' '.join(TGT[t] for t in g)!r}")


if __name__ == "__main__":
    main()
