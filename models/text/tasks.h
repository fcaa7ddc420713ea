#pragma once
// Synthetic translation tasks generated in code from a seed. Each yields SentencePair strings
// that go through the same pipeline as a file (tokenize_pairs, Vocab, Seq2SeqDataset); the
// strings are already lower-case with spaces around punctuation, so preprocess_nmt leaves them
// unchanged and every token is what the generator meant it to be.
//
//   auto pairs = tg::models::make_task("dates", {.count = 2000, .seed = 1});
//
// Tasks:
// - dates:   a date between 1950-01-01 and 2049-12-31 written in one of kDateFormats human
//            formats → its ISO form. Words stay whole tokens, every digit is its own token and
//            punctuation is its own token: "the 3 rd of march 1 9 9 7", "3 / 3 / 9 7",
//            "tuesday , march 4 , 1 9 9 7" → "1 9 9 7 - 0 3 - 0 4". Removing the spaces from
//            the target gives the ISO string. Slash dates are month/day/year (US), dotted and
//            dashed dates are day.month.year; two-digit years 50-99 mean 19xx, 00-49 mean 20xx.
//            min_len/max_len are not used.
// - reverse: min_len..max_len tokens drawn from the letters a..j → the same tokens reversed.
// - copy:    as reverse, target = source.
// - primes:  min_len..max_len integers in 1..99 (one token each) → the primes among them in
//            their original order; the target is empty when there are none.
#include <cstdint>
#include <string>
#include <vector>

#include "models/text/data.h"

namespace tg::models {

/// Options of make_task. Validated by make_task, which also refuses more than kMaxTaskTokens
/// source tokens in all (count * max_len) before generating anything.
inline constexpr std::int64_t kMaxTaskPairs = std::int64_t{1} << 24;
inline constexpr std::int64_t kMaxTaskLen = 4096;
inline constexpr std::int64_t kMaxTaskTokens = std::int64_t{1} << 28;
struct TaskOptions {
  std::int64_t count = 1000;  ///< number of pairs (0 ..= kMaxTaskPairs)
  std::int64_t min_len = 1;   ///< shortest source sequence (>= 1; not used by dates)
  std::int64_t max_len = 8;   ///< longest source sequence (min_len ..= kMaxTaskLen; not used by dates)
  std::uint64_t seed = 0;     ///< the generator seed: same options, same pairs
};

/// Names of the built-in tasks, sorted: {"copy", "dates", "primes", "reverse"}.
std::vector<std::string> task_names();

/// `options.count` pairs of task `name`, drawn from Generator(options.seed). Throws
/// std::invalid_argument listing the known task names for an unknown name, and on invalid options.
std::vector<SentencePair> make_task(const std::string& name, const TaskOptions& options = {});

/// Human-written input rewritten in task `name`'s tokenisation, so a model trained on the task
/// can translate what a person types: dates splits digits, punctuation and letter/digit
/// boundaries ("The 3rd of March, 1997" -> "the 3 rd of march , 1 9 9 7"); reverse and copy split
/// a word without spaces into letters ("abc" -> "a b c"); primes turns commas into spaces.
/// Throws std::invalid_argument for an unknown task.
std::string task_input(const std::string& name, const std::string& text);

/// Number of date formats of the dates task.
inline constexpr int kDateFormats = 10;

/// Date `format` (0 .. kDateFormats-1) of a valid date, tokenised as the dates task writes it,
/// e.g. format 0 of 1997-03-03 = "the 3 rd of march 1 9 9 7". Throws std::invalid_argument on an
/// invalid date or format.
std::string format_date(int year, int month, int day, int format);
/// The dates task's target: "1 9 9 7 - 0 3 - 0 3" for 1997-03-03.
std::string iso_date_target(int year, int month, int day);
/// Day of the week, 0 = monday .. 6 = sunday (proleptic Gregorian calendar).
int weekday(int year, int month, int day);
/// True if 1 <= month <= 12 and 1 <= day <= the month's length (leap years included).
bool is_valid_date(int year, int month, int day);

/// True if n is prime.
bool is_prime(std::int64_t n);

}  // namespace tg::models
