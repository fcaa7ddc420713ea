#include "models/text/tasks.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
#include <functional>
#include <map>
#include <stdexcept>

#include "autograd/error_text.h"
#include "autograd/random.h"
#include "models/text/text.h"

namespace tg::models {

namespace {

constexpr std::array<const char*, 12> kMonths{"january", "february", "march",     "april",   "may",      "june",
                                              "july",    "august",   "september", "october", "november", "december"};
constexpr std::array<const char*, 12> kMonthAbbrev{"jan", "feb", "mar", "apr", "may", "jun",
                                                   "jul", "aug", "sep", "oct", "nov", "dec"};
constexpr std::array<const char*, 7> kWeekdays{"monday", "tuesday", "wednesday", "thursday",
                                               "friday", "saturday", "sunday"};
constexpr int kFirstYear = 1950, kLastYear = 2049;  // two-digit years are unambiguous in this range

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
std::int64_t days_from_civil(std::int64_t y, int m, int d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const std::int64_t yoe = y - era * 400;
  const std::int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const std::int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

// Inverse of days_from_civil.
void civil_from_days(std::int64_t z, int& year, int& month, int& day) {
  z += 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const std::int64_t doe = z - era * 146097;
  const std::int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const std::int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const std::int64_t mp = (5 * doy + 2) / 153;
  day = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
  month = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
  year = static_cast<int>(yoe + era * 400 + (month <= 2));
}

// "1997" → "1 9 9 7"; width > 0 zero-pads first ("3", 2 → "0 3").
std::string spaced_digits(int value, int width = 0) {
  std::string digits = std::to_string(value);
  if (static_cast<int>(digits.size()) < width) digits.insert(0, width - digits.size(), '0');
  std::string out;
  for (char c : digits) {
    if (!out.empty()) out += ' ';
    out += c;
  }
  return out;
}

const char* ordinal_suffix(int day) {
  if (day % 100 >= 11 && day % 100 <= 13) return "th";
  switch (day % 10) {
    case 1: return "st";
    case 2: return "nd";
    case 3: return "rd";
    default: return "th";
  }
}

std::vector<SentencePair> dates_task(const TaskOptions& o, Generator& gen) {
  const std::int64_t first = days_from_civil(kFirstYear, 1, 1), last = days_from_civil(kLastYear, 12, 31);
  std::vector<SentencePair> pairs;
  pairs.reserve(static_cast<std::size_t>(o.count));
  for (std::int64_t i = 0; i < o.count; ++i) {
    int y, m, d;
    civil_from_days(first + static_cast<std::int64_t>(gen.below(static_cast<std::uint64_t>(last - first + 1))), y, m, d);
    const int format = static_cast<int>(gen.below(kDateFormats));
    pairs.push_back({format_date(y, m, d, format), iso_date_target(y, m, d)});
  }
  return pairs;
}

std::int64_t draw_length(const TaskOptions& o, Generator& gen) {
  return o.min_len + static_cast<std::int64_t>(gen.below(static_cast<std::uint64_t>(o.max_len - o.min_len + 1)));
}

std::vector<std::string> letters(const TaskOptions& o, Generator& gen) {
  std::vector<std::string> tokens(static_cast<std::size_t>(draw_length(o, gen)));
  for (std::string& t : tokens) t = std::string(1, static_cast<char>('a' + gen.below(10)));
  return tokens;
}

std::string join(const std::vector<std::string>& tokens) {
  std::string out;
  for (const std::string& t : tokens) {
    if (!out.empty()) out += ' ';
    out += t;
  }
  return out;
}

std::vector<SentencePair> copy_task(const TaskOptions& o, Generator& gen) {
  std::vector<SentencePair> pairs;
  for (std::int64_t i = 0; i < o.count; ++i) {
    const std::string s = join(letters(o, gen));
    pairs.push_back({s, s});
  }
  return pairs;
}

std::vector<SentencePair> reverse_task(const TaskOptions& o, Generator& gen) {
  std::vector<SentencePair> pairs;
  for (std::int64_t i = 0; i < o.count; ++i) {
    std::vector<std::string> tokens = letters(o, gen);
    const std::string src = join(tokens);
    std::reverse(tokens.begin(), tokens.end());
    pairs.push_back({src, join(tokens)});
  }
  return pairs;
}

std::vector<SentencePair> primes_task(const TaskOptions& o, Generator& gen) {
  std::vector<SentencePair> pairs;
  for (std::int64_t i = 0; i < o.count; ++i) {
    std::vector<std::string> src, tgt;
    const std::int64_t len = draw_length(o, gen);
    for (std::int64_t k = 0; k < len; ++k) {
      const std::int64_t n = 1 + static_cast<std::int64_t>(gen.below(99));
      src.push_back(std::to_string(n));
      if (is_prime(n)) tgt.push_back(src.back());
    }
    pairs.push_back({join(src), join(tgt)});
  }
  return pairs;
}

using TaskFn = std::function<std::vector<SentencePair>(const TaskOptions&, Generator&)>;

const std::map<std::string, TaskFn>& registry() {
  static const std::map<std::string, TaskFn> tasks{
      {"copy", copy_task}, {"dates", dates_task}, {"primes", primes_task}, {"reverse", reverse_task}};
  return tasks;
}

}  // namespace

std::vector<std::string> task_names() {
  std::vector<std::string> names;
  for (const auto& [name, fn] : registry()) names.push_back(name);
  return names;
}

std::vector<SentencePair> make_task(const std::string& name, const TaskOptions& options) {
  const auto it = registry().find(name);
  if (it == registry().end()) {
    std::string known;
    for (const std::string& n : task_names()) known += (known.empty() ? "" : ", ") + n;
    throw std::invalid_argument("make_task: unknown task '" + elide(name) + "'; known tasks: " + known);
  }
  if (options.count < 0 || options.count > kMaxTaskPairs)
    throw std::invalid_argument("make_task: count = " + std::to_string(options.count) + " is out of range [0, " +
                                std::to_string(kMaxTaskPairs) + "]");
  if (options.min_len < 1 || options.max_len < options.min_len || options.max_len > kMaxTaskLen) {
    throw std::invalid_argument("make_task: need 1 <= min_len <= max_len <= " + std::to_string(kMaxTaskLen) +
                                ", got min_len=" + std::to_string(options.min_len) +
                                ", max_len=" + std::to_string(options.max_len));
  }
  if (options.count * options.max_len > kMaxTaskTokens)  // both bounded above: no overflow
    throw std::invalid_argument("make_task: count * max_len = " + std::to_string(options.count * options.max_len) +
                                " source tokens, more than the limit " + std::to_string(kMaxTaskTokens));
  Generator gen(options.seed);
  return it->second(options, gen);
}

bool is_valid_date(int year, int month, int day) {
  if (month < 1 || month > 12 || day < 1) return false;
  static constexpr std::array<int, 12> kDays{31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  return day <= kDays[month - 1] + (month == 2 && leap ? 1 : 0);
}

int weekday(int year, int month, int day) {
  // 1970-01-01 was a thursday (3 with monday = 0).
  const std::int64_t w = (days_from_civil(year, month, day) + 3) % 7;
  return static_cast<int>(w < 0 ? w + 7 : w);
}

std::string iso_date_target(int year, int month, int day) {
  if (!is_valid_date(year, month, day) || year < 0 || year > 9999) {
    throw std::invalid_argument("iso_date_target: invalid date");
  }
  return spaced_digits(year, 4) + " - " + spaced_digits(month, 2) + " - " + spaced_digits(day, 2);
}

std::string format_date(int year, int month, int day, int format) {
  if (!is_valid_date(year, month, day) || year < 0 || year > 9999) {
    throw std::invalid_argument("format_date: invalid date " + std::to_string(year) + "-" + std::to_string(month) +
                                "-" + std::to_string(day));
  }
  const std::string y4 = spaced_digits(year, 4), y2 = spaced_digits(year % 100, 2);
  const std::string m = spaced_digits(month), mm = spaced_digits(month, 2);
  const std::string d = spaced_digits(day), dd = spaced_digits(day, 2);
  const std::string month_name = kMonths[month - 1], wd = kWeekdays[weekday(year, month, day)];
  switch (format) {
    case 0: return "the " + d + " " + ordinal_suffix(day) + " of " + month_name + " " + y4;
    case 1: return m + " / " + d + " / " + y2;
    case 2: return month_name + " " + d + " , " + y4;
    case 3: return wd + " , " + month_name + " " + d + " , " + y4;
    case 4: return dd + " . " + mm + " . " + y4;
    case 5: return y4 + " " + month_name + " " + d;
    case 6: return d + " " + kMonthAbbrev[month - 1] + " " + y4;
    case 7: return month_name + " " + d + " " + ordinal_suffix(day) + " , " + y4;
    case 8: return dd + " - " + mm + " - " + y2;
    case 9: return wd + " " + d + " " + month_name + " " + y4;
    default: throw std::invalid_argument("format_date: format must be in [0, " + std::to_string(kDateFormats) +
                                         "), got " + std::to_string(format));
  }
}

bool is_prime(std::int64_t n) {
  if (n < 2) return false;
  for (std::int64_t k = 2; k * k <= n; ++k) {
    if (n % k == 0) return false;
  }
  return true;
}

std::string task_input(const std::string& name, const std::string& text) {
  const auto names = task_names();
  if (std::find(names.begin(), names.end(), name) == names.end())
    throw std::invalid_argument("task_input: unknown task '" + elide(name) + "'");
  const std::string lower = to_lower_utf8(text);
  std::string out;
  auto separate = [&] {
    if (!out.empty() && out.back() != ' ') out += ' ';
  };
  const bool spaced = lower.find(' ') != std::string::npos;
  for (std::size_t i = 0; i < lower.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(lower[i]);
    const bool digit = std::isdigit(c) != 0;
    if (c == ' ' || c == '\t') {
      separate();
    } else if (name == "dates" && (digit || std::strchr(",./-", c))) {
      separate();  // digits and punctuation are tokens of their own
      out += static_cast<char>(c);
      out += ' ';
    } else if (name == "primes" && c == ',') {
      separate();
    } else if ((name == "reverse" || name == "copy") && !spaced) {
      separate();
      out += static_cast<char>(c);
      out += ' ';
    } else {
      out += static_cast<char>(c);
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

}  // namespace tg::models
