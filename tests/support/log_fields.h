// Reading `key=value` figures out of the progress and summary lines that the
// spotps binaries print.
#ifndef SPOTPS_TESTS_SUPPORT_LOG_FIELDS_H_
#define SPOTPS_TESTS_SUPPORT_LOG_FIELDS_H_

#include <regex>
#include <string>

namespace spotps::testing {

// The number after the first "key=" in `text`, or -1 if there is none.
inline double LogField(const std::string& text, const std::string& key) {
  std::smatch m;
  const std::regex re("(^|[ \\n])" + key + "=(-?[0-9.]+)");
  return std::regex_search(text, m, re) ? std::stod(m[2]) : -1.0;
}

}  // namespace spotps::testing

#endif  // SPOTPS_TESTS_SUPPORT_LOG_FIELDS_H_
