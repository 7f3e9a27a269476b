// core/crash_report.h: a process that dies of a fatal signal says so on stderr with its
// backtrace, and still dies of that signal (exit status and core dumps unchanged).
#include <QtTest>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "core/crash_report.h"

class TestCrashReport : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void aFatalSignalIsReportedAndStillFatal_data() {
    QTest::addColumn<int>("sig");
    QTest::newRow("SIGSEGV") << int(SIGSEGV);
    QTest::newRow("SIGABRT") << int(SIGABRT);
  }
  void aFatalSignalIsReportedAndStillFatal() {
#if defined(__SANITIZE_ADDRESS__)
    QSKIP("AddressSanitizer handles fatal signals itself");
#endif
    QFETCH(int, sig);
    int fds[2];
    QVERIFY(::pipe(fds) == 0);
    const pid_t child = ::fork();
    QVERIFY(child >= 0);
    if (child == 0) {
      ::dup2(fds[1], 2);
      ::close(fds[0]);
      rag::installCrashReport("crash-test");
      ::raise(sig);
      ::_exit(0);  // not reached: the report re-raises the signal with its default action
    }
    ::close(fds[1]);
    std::string err;
    char buf[4096];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) err.append(buf, static_cast<size_t>(n));
    ::close(fds[0]);
    int status = 0;
    QCOMPARE(::waitpid(child, &status, 0), child);
    QVERIFY2(WIFSIGNALED(status) && WTERMSIG(status) == sig, err.c_str());
    QVERIFY2(err.find("crash-test: fatal signal " + std::to_string(sig)) != std::string::npos, err.c_str());
    QVERIFY2(err.find("backtrace:") != std::string::npos && err.find("addr2line") != std::string::npos, err.c_str());
    QVERIFY2(err.find("test_crash_report") != std::string::npos, err.c_str());  // a frame of this binary
  }
};

QTEST_GUILESS_MAIN(TestCrashReport)
#include "test_crash_report.moc"
