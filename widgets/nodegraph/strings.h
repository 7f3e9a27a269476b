// The engine speaks UTF-8 std::string; Qt speaks QString. One conversion for the editor.
#pragma once

#include <QString>
#include <string_view>

namespace ragwb {

inline QString toQString(std::string_view s) {
  return QString::fromUtf8(s.data(), qsizetype(s.size()));
}

}  // namespace ragwb
