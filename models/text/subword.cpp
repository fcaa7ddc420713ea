// SentencePiece subword models; see subword.h.
#include "models/text/subword.h"

#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <unordered_map>

#include "nn/file_io.h"

#ifdef TG_HAVE_SENTENCEPIECE
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#endif

namespace tg::models {

const char* to_string(SubwordType type) { return type == SubwordType::kBpe ? "bpe" : "unigram"; }

SubwordType parse_subword_type(const std::string& name, const std::string& what) {
  if (name == "unigram") return SubwordType::kUnigram;
  if (name == "bpe") return SubwordType::kBpe;
  throw std::invalid_argument(what + ": expected unigram or bpe, got '" + name + "'");
}

#ifdef TG_HAVE_SENTENCEPIECE

struct SubwordModel::Impl {
  std::string bytes;
  sentencepiece::SentencePieceProcessor processor;
};

namespace {

// Feeds the training sentences from memory (no temporary file).
class VectorIterator : public sentencepiece::SentenceIterator {
 public:
  explicit VectorIterator(const std::vector<std::string>& s) : s_(s) {}
  bool done() const override { return i_ >= s_.size(); }
  void Next() override { ++i_; }
  const std::string& value() const override { return s_[i_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string>& s_;
  std::size_t i_ = 0;
};

// Protocol-buffer wire format, just enough to read the normalization tables of a ModelProto
// (SentencePiece installs no header for it). False on a malformed message.
bool read_varint(std::string_view& in, std::uint64_t& v) {
  v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (in.empty()) return false;
    const auto byte = static_cast<unsigned char>(in.front());
    in.remove_prefix(1);
    v |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
    if (!(byte & 0x80)) return true;
  }
  return false;
}

/// Calls f(field, value) for each length-delimited field of `msg`, in order.
template <class F> bool for_each_bytes_field(std::string_view msg, F&& f) {
  while (!msg.empty()) {
    std::uint64_t key = 0, n = 0;
    if (!read_varint(msg, key)) return false;
    switch (key & 7) {
      case 0: if (!read_varint(msg, n)) return false; break;
      case 1: if (msg.size() < 8) return false; msg.remove_prefix(8); break;
      case 5: if (msg.size() < 4) return false; msg.remove_prefix(4); break;
      case 2:
        if (!read_varint(msg, n) || n > msg.size()) return false;
        f(key >> 3, msg.substr(0, n));
        msg.remove_prefix(n);
        break;
      default: return false;
    }
  }
  return true;
}

/// The effective precompiled_charsmap (NormalizerSpec field 2) of ModelProto field `spec_field`
/// (3: normalizer_spec, 5: denormalizer_spec); a repeated embedded message merges, so the last
/// value wins. Nullopt on a malformed message.
std::optional<std::string> charsmap(std::string_view model, std::uint64_t spec_field) {
  std::string out;
  bool ok = true;
  const bool parsed = for_each_bytes_field(model, [&](std::uint64_t field, std::string_view spec) {
    if (field != spec_field) return;
    ok = ok && for_each_bytes_field(spec, [&](std::uint64_t f, std::string_view v) {
      if (f == 2) out.assign(v);
    });
  });
  if (!parsed || !ok) return std::nullopt;
  return out;
}

/// The normalization table of the models SubwordModel::train writes (SentencePiece's default rule,
/// nmt_nfkc), taken from a model trained once on two sentences.
const std::string& trained_charsmap() {
  static const std::string table = [] {
    const std::vector<std::string> sentences{"ab", "ba"};
    VectorIterator it(sentences);
    std::string bytes;
    const auto status = sentencepiece::SentencePieceTrainer::Train(
        {{"vocab_size", "16"}, {"hard_vocab_limit", "false"}, {"num_threads", "1"}, {"minloglevel", "2"}}, &it, &bytes);
    if (!status.ok()) throw std::runtime_error("subword: SentencePiece training failed: " + status.ToString());
    return charsmap(bytes, 3).value_or(std::string());
  }();
  return table;
}

}  // namespace

bool SubwordModel::available() { return true; }

SubwordModel SubwordModel::train(const std::vector<std::string>& sentences, const SubwordOptions& options) {
  if (options.vocab_size() < 8)
    throw std::invalid_argument("subword: vocab_size must be >= 8, got " + std::to_string(options.vocab_size()));
  if (sentences.empty()) throw std::invalid_argument("subword: no training sentences");
  // input_sentence_size=0: every sentence (no random sample); hard_vocab_limit=false: a small
  // corpus gets fewer pieces rather than an error; num_threads=1: same model on every machine.
  // Options as a map: the string form logs its whole command line on stderr before it reads
  // minloglevel.
  const std::unordered_map<std::string, std::string> args{
      {"model_type", to_string(options.type())}, {"vocab_size", std::to_string(options.vocab_size())},
      {"input_sentence_size", "0"},              {"hard_vocab_limit", "false"},
      {"num_threads", "1"},                      {"minloglevel", "2"},
      {"max_sentence_length", "65536"}};
  VectorIterator it(sentences);
  std::string bytes;
  const auto status = sentencepiece::SentencePieceTrainer::Train(args, &it, &bytes);
  if (!status.ok()) throw std::runtime_error(std::string("subword: SentencePiece training failed: ") + status.ToString());
  return from_bytes(std::move(bytes), "subword training");
}

SubwordModel SubwordModel::from_bytes(std::string bytes, const std::string& source) {
  // The size load() reads (nn::io::limits::kTokenizerModel): a trained model above it would be
  // saved into a checkpoint that no load accepts, so it is refused here, right after training.
  if (bytes.size() > nn::io::limits::kTokenizerModel)
    throw std::runtime_error(source + ": the SentencePiece model is " + std::to_string(bytes.size()) +
                             " bytes, above the limit of 64 MiB that tokenizer.model is read with");
  auto impl = std::make_shared<Impl>();
  impl->bytes = std::move(bytes);
  sentencepiece::util::Status status;
  try {
    status = impl->processor.LoadFromSerializedProto(impl->bytes);
  } catch (const std::exception& e) {  // its trie builder throws on some pieces (an empty one)
    throw std::runtime_error(source + ": not a valid SentencePiece model (" + e.what() + ")");
  }
  if (!status.ok())
    throw std::runtime_error(source + ": not a valid SentencePiece model (" + status.ToString() + ")");
  // SentencePiece 0.1.97 uses a model's normalization table without checking it, and a changed
  // table makes it read past its end while encoding (found by tests/fuzz/fuzz_tokenizer). Only
  // the tables SubwordModel::train writes are accepted: SentencePiece's default, or none.
  const auto normalizer = charsmap(impl->bytes, 3), denormalizer = charsmap(impl->bytes, 5);
  if (!normalizer || !denormalizer || !(normalizer->empty() || *normalizer == trained_charsmap()) ||
      !denormalizer->empty())
    throw std::runtime_error(source + ": not a valid SentencePiece model (its normalization table is not the one "
                                      "tapegrad trains with: a changed or corrupt file)");
  // Every piece must map back to its own id (no duplicate or unreachable piece), so that the
  // pieces encode() returns are the model's (has_piece) and the vocabularies built from them hold.
  for (int id = 0; id < impl->processor.GetPieceSize(); ++id)
    if (impl->processor.PieceToId(impl->processor.IdToPiece(id)) != id)
      throw std::runtime_error(source + ": not a valid SentencePiece model (piece " + std::to_string(id) +
                               " does not map back to its id: a duplicate or unusable piece)");
  SubwordModel m;
  m.impl_ = std::move(impl);
  return m;
}

std::vector<std::string> SubwordModel::encode(const std::string& sentence) const {
  // Through ids, so a character the model does not cover comes out as its unknown piece ("<unk>",
  // which is also the vocabularies' reserved <unk>) rather than as the character itself.
  std::vector<int> ids;
  const auto status = impl_->processor.Encode(sentence, &ids);
  if (!status.ok()) throw std::runtime_error("subword: cannot encode '" + sentence + "': " + status.ToString());
  std::vector<std::string> pieces;
  pieces.reserve(ids.size());
  for (int id : ids) pieces.push_back(impl_->processor.IdToPiece(id));
  return pieces;
}

std::string SubwordModel::decode(const std::vector<std::string>& pieces) const {
  std::string text;
  const auto status = impl_->processor.Decode(pieces, &text);
  if (!status.ok()) throw std::runtime_error("subword: cannot decode: " + status.ToString());
  return text;
}

bool SubwordModel::has_piece(const std::string& piece) const {
  const int id = impl_->processor.PieceToId(piece);
  return !impl_->processor.IsUnknown(id) || piece == impl_->processor.IdToPiece(id);
}

std::int64_t SubwordModel::size() const { return impl_->processor.GetPieceSize(); }

#else  // no SentencePiece in this build

struct SubwordModel::Impl {
  std::string bytes;
};

namespace {
[[noreturn]] void unavailable(const std::string& what) {
  throw std::runtime_error(what + ": this build of tapegrad has no SentencePiece (install libsentencepiece-dev and "
                                  "rebuild)");
}
}  // namespace

bool SubwordModel::available() { return false; }
SubwordModel SubwordModel::train(const std::vector<std::string>&, const SubwordOptions&) { unavailable("subword"); }
SubwordModel SubwordModel::from_bytes(std::string, const std::string& source) { unavailable(source); }
std::vector<std::string> SubwordModel::encode(const std::string&) const { unavailable("subword"); }
std::string SubwordModel::decode(const std::vector<std::string>&) const { unavailable("subword"); }
bool SubwordModel::has_piece(const std::string&) const { unavailable("subword"); }
std::int64_t SubwordModel::size() const { unavailable("subword"); }

#endif

SubwordModel SubwordModel::load(const std::string& path) {
  return from_bytes(nn::io::read_file(path, nn::io::limits::kTokenizerModel), path);
}

TokenizedPairs encode_pairs(const std::vector<SentencePair>& pairs, const SubwordModel& model) {
  TokenizedPairs out;
  out.src.reserve(pairs.size());
  out.tgt.reserve(pairs.size());
  for (const auto& p : pairs) {
    out.src.push_back(model.encode(p.src));
    out.tgt.push_back(model.encode(p.tgt));
  }
  return out;
}

const std::string& SubwordModel::bytes() const { return impl_->bytes; }

void SubwordModel::save(const std::string& path) const {
  nn::io::write_file_atomic(path, impl_->bytes);
}

}  // namespace tg::models
