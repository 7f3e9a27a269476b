// Include QCustomPlot through this header. qcustomplot.h (2.1) uses Qt's `signals` and
// `foreach` keywords, which the project's QT_NO_KEYWORDS (kept for the torch headers) removes;
// they are defined for this one header and removed again.
#pragma once

#include <QtGlobal>

#ifdef QT_NO_KEYWORDS
#define signals Q_SIGNALS
#define foreach Q_FOREACH
#include <qcustomplot.h>
#undef signals
#undef foreach
#else
#include <qcustomplot.h>
#endif
