// betterBlasKernelSet: which OpenBLAS kernel set the CLI and the workbench pin when Debian's
// OpenBLAS fell back to its SSE3 one (core/blas_info.h). The restart itself is checked end to end
// in app_test_cli_llm::benchPrintsTheFigures.
#include <QtTest>

#include "core/blas_info.h"

using namespace rag;

class TestBlasInfo : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void onlyAFallbackIsReplaced() {
    const CpuVectorFeatures avx512{.avx512 = true, .avx2Fma = true}, avx2{.avx512 = false, .avx2Fma = true}, sse{};
    QCOMPARE(betterBlasKernelSet("Prescott", avx512), std::string("SkylakeX"));
    QCOMPARE(betterBlasKernelSet("PRESCOTT", avx2), std::string("Haswell"));
    QCOMPARE(betterBlasKernelSet("Prescott", sse), std::string());      // nothing better to run
    QCOMPARE(betterBlasKernelSet("Cooperlake", avx512), std::string());  // it knew the CPU
    QCOMPARE(betterBlasKernelSet("Haswell", avx512), std::string());     // pinned by someone
    QCOMPARE(betterBlasKernelSet("", avx512), std::string());            // no OpenBLAS here
  }
};

QTEST_GUILESS_MAIN(TestBlasInfo)
#include "test_blas_info.moc"
