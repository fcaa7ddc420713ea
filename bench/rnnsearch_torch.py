"""RNNsearch in PyTorch, as models/translators/rnnsearch_model.cpp builds it (shared by
bench/pytorch_reference.py and scripts/pytorch_rnnsearch.py). Import it after the thread
environment (OPENBLAS_NUM_THREADS, OMP_WAIT_POLICY) is set: it imports torch."""
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


class RnnSearch(nn.Module):
    """models/translators/rnnsearch_model.cpp: bidirectional GRU encoder over the valid positions, s_0 =
    tanh(W_s <-h_1), additive attention with U_a h_j computed once per sentence (dropout w["dropout"]
    on its weights, as nn::AdditiveAttention), GRUCell on [E y_{i-1}; c_i], readout from
    [s_i; E y_{i-1}; c_i] (linear, or maxout of w.get("maxout_units", hidden // 2) units then linear).
    w: src_vocab, tgt_vocab, embed, hidden, dropout, readout. PyTorch's default initialisation, which is
    tapegrad's scheme (Linear: kaiming-uniform, Embedding: N(0, 1), GRU: U(-1/sqrt(H), 1/sqrt(H)))."""

    def __init__(self, w):
        super().__init__()
        E, H, D = w["embed"], w["hidden"], 2 * w["hidden"]
        self.dropout = w.get("dropout", 0.0)
        self.src_embedding = nn.Embedding(w["src_vocab"], E)
        self.encoder_rnn = nn.GRU(E, H, bidirectional=True)
        self.init = nn.Linear(H, H, bias=False)
        self.W_k = nn.Linear(D, H, bias=False)   # U_a
        self.W_q = nn.Linear(H, H, bias=False)   # W_a
        self.w_v = nn.Linear(H, 1, bias=False)   # v_a
        self.tgt_embedding = nn.Embedding(w["tgt_vocab"], E)
        self.rnn = nn.GRUCell(E + D, H)
        out_in = H + E + D
        if w["readout"] == "maxout":
            units = w.get("maxout_units") or max(1, H // 2)
            self.maxout = nn.Linear(out_in, 2 * units)
            self.dense = nn.Linear(units, w["tgt_vocab"])
        else:
            self.maxout = None
            self.dense = nn.Linear(out_in, w["tgt_vocab"])

    def begin(self, src, src_len):
        S = src.size(1)
        x = self.src_embedding(src).permute(1, 0, 2)                        # (S, B, E)
        packed = pack_padded_sequence(x, src_len, enforce_sorted=False)
        out, h_n = self.encoder_rnn(packed)
        out, _ = pad_packed_sequence(out, total_length=S)                   # (S, B, 2H), zeros at padding
        memory = out.permute(1, 0, 2)                                       # (B, S, 2H)
        keys = self.W_k(memory)                                             # once per sentence
        s = torch.tanh(self.init(h_n[1]))                                   # <-h_1
        mask = torch.arange(S)[None, :] < src_len[:, None]                  # (B, S)
        return [memory, keys, mask, s]

    def context(self, s, state):
        memory, keys, mask, _ = state
        q = self.W_q(s).unsqueeze(1)                                         # (B, 1, H)
        scores = self.w_v(torch.tanh(q + keys)).squeeze(-1)                  # (B, S)
        alpha = torch.softmax(scores.masked_fill(~mask, -1e6), dim=-1)
        if self.dropout > 0:
            alpha = nn.functional.dropout(alpha, self.dropout, self.training)
        return torch.bmm(alpha.unsqueeze(1), memory).squeeze(1)              # (B, 2H)

    def readout(self, feats):
        if self.maxout is None:
            return self.dense(feats)
        t = self.maxout(feats)
        t = t.reshape(*t.shape[:-1], t.size(-1) // 2, 2).max(dim=-1).values
        return self.dense(t)

    def features(self, src, src_len, dec_input):
        """Teacher forcing: the readout's input [s_i; E y_{i-1}; c_i] at every step, (B, T, H + E + 2H)."""
        state = self.begin(src, src_len)
        s = state[3]
        emb = self.tgt_embedding(dec_input)                                  # (B, T, E)
        states, contexts = [], []
        for t in range(dec_input.size(1)):
            e = emb[:, t]
            c = self.context(s, state)
            s = self.rnn(torch.cat((e, c), dim=-1), s)
            states.append(s)
            contexts.append(c)
        return torch.cat((torch.stack(states, 1), emb, torch.stack(contexts, 1)), dim=-1)

    def forward(self, src, src_len, dec_input):
        return self.readout(self.features(src, src_len, dec_input))         # (B, T, V), one product

    def step(self, y_prev, state):
        e = self.tgt_embedding(y_prev)
        s = state[3]
        c = self.context(s, state)
        s = self.rnn(torch.cat((e, c), dim=-1), s)
        state[3] = s
        return self.readout(torch.cat((s, e, c), dim=-1)), state
