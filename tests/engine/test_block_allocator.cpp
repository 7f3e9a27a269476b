// One KV tier's accounting: allocation, sharing by reference counts, the free list.
#include <QtTest>

#include <stdexcept>

#include "memory/block_allocator.h"

using namespace rag::memory;

class TestBlockAllocator : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void allocateShareRelease() {
    BlockAllocator a(4);
    QCOMPARE(a.capacity(), 4);
    QCOMPARE(*a.allocate(), 0);  // lowest id first
    const int32_t b = *a.allocate();
    QCOMPARE(a.usedBlocks(), 2);
    a.retain(b);
    QCOMPARE(a.refCount(b), 2);
    QCOMPARE(a.sharedBlocks(), 1);
    QVERIFY(!a.release(b));  // one owner left
    QVERIFY(a.release(b));   // back on the free list
    QCOMPARE(a.usedBlocks(), 1);
    QCOMPARE(*a.allocate(), b);  // most recently freed is reused first
  }

  void allOrNothing() {
    BlockAllocator a(3);
    QVERIFY(!a.allocate(4).has_value());
    QCOMPARE(a.freeBlocks(), 3);  // a failed request takes nothing
    auto got = a.allocate(3);
    QVERIFY(got.has_value());
    QCOMPARE(got->size(), size_t{3});
    QVERIFY(!a.allocate().has_value());
    a.release(*got);
    QCOMPARE(a.freeBlocks(), 3);
  }

  void misuseThrowsInsteadOfCorrupting() {
    BlockAllocator a(2);
    QVERIFY_THROWS_EXCEPTION(std::logic_error, a.release(1));
    QVERIFY_THROWS_EXCEPTION(std::logic_error, a.retain(0));
    QCOMPARE(a.freeBlocks(), 2);
  }
};

QTEST_GUILESS_MAIN(TestBlockAllocator)
#include "test_block_allocator.moc"
