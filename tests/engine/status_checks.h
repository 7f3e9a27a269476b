// Test helper: does an error message name everything a user needs (file, tensor, fix)?
#pragma once

#include <QtGlobal>

#include <initializer_list>
#include <string>
#include <string_view>

#include "rag/status.h"

inline bool mentions(const rag::Status& s, std::initializer_list<std::string_view> parts) {
  for (std::string_view p : parts)
    if (s.message().find(p) == std::string::npos) {
      qWarning("message '%s' lacks '%s'", s.message().c_str(), std::string(p).c_str());
      return false;
    }
  return true;
}

// The status of a Status or a Result, for the check below.
inline const rag::Status& statusOf(const rag::Status& s) { return s; }
template <typename T>
rag::Status statusOf(const rag::Result<T>& r) { return r.status(); }
// Fails the test function (which must return void) with the error's message. `expr` is
// evaluated once (QVERIFY2 evaluates its message whether or not the check fails).
#define QVERIFY_OK(expr)                                                  \
  do {                                                                    \
    const rag::Status rag_checked_ = statusOf(expr);                      \
    QVERIFY2(rag_checked_.isOk(), rag_checked_.message().c_str());        \
  } while (0)
