#include <QtTest>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "status_checks.h"
#include "model/safetensors.h"

using namespace rag;
using namespace rag::model;

namespace {

const std::string kFixture = std::string(RAGWB_FIXTURES_DIR) + "/safetensors/torch_small.safetensors";

template <typename T>
std::span<const std::byte> bytesOf(const std::vector<T>& v) {
  return std::as_bytes(std::span<const T>(v));
}

// Writes a safetensors file by hand: the length prefix (the header's real length unless
// `claimedLength` says otherwise), the header text, then `data`.
void writeRaw(const std::string& path, const std::string& header, const std::string& data,
              std::optional<uint64_t> claimedLength = std::nullopt) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  uint64_t len = claimedLength.value_or(header.size());
  out.write(reinterpret_cast<const char*>(&len), 8);
  out << header << data;
}

template <typename T>
std::string rawBytes(std::initializer_list<T> values) {
  std::string s(values.size() * sizeof(T), '\0');
  std::memcpy(s.data(), std::data(values), s.size());
  return s;
}

// Opens a file expected to be rejected and returns the error.
Status openError(const std::string& path) {
  Result<SafetensorsFile> f = SafetensorsFile::open(path);
  if (f) return Status::internal("unexpectedly opened " + path);
  return f.status();
}

}  // namespace

class TestSafetensors : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void writeThenRead() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("w/model.safetensors").toStdString();
    std::vector<float> a = {1.5f, -2.0f, 0.25f, 3.0f, -0.5f, 100.0f};
    std::vector<uint16_t> b;
    for (float v : {1.0f, -3.5f, 0.1f}) b.push_back(f32ToBf16(v));
    std::vector<int64_t> c = {5, -6};
    std::vector<TensorToWrite> tensors = {
        {"a.weight", DType::F32, {2, 3}, bytesOf(a)},
        {"b.bf16", DType::BF16, {3}, bytesOf(b)},
        {"c.ids", DType::I64, {2}, bytesOf(c)},
    };
    std::vector<std::pair<std::string, std::string>> meta = {{"format", "pt"}, {"step", "12"}};
    QVERIFY(writeSafetensors(path, tensors, meta).isOk());
    QVERIFY(!QFile::exists(QString::fromStdString(path) + ".tmp-" + QString::number(getpid())));

    // The header is padded so the data section starts 8-byte aligned.
    std::ifstream in(path, std::ios::binary);
    uint64_t headerLen = 0;
    in.read(reinterpret_cast<char*>(&headerLen), 8);
    QCOMPARE(headerLen % 8, uint64_t{0});

    Result<SafetensorsFile> f = SafetensorsFile::open(path);
    QVERIFY2(f.isOk(), f.status().toString().c_str());
    QCOMPARE(f->tensors().size(), size_t{3});
    QCOMPARE(f->metadata(), meta);
    const TensorView* ta = f->find("a.weight");
    QVERIFY(ta);
    QCOMPARE(ta->dtype, DType::F32);
    QCOMPARE(ta->shape, (std::vector<int64_t>{2, 3}));
    QCOMPARE(ta->nbytes, size_t{24});
    QCOMPARE(*toF32(*ta), a);
    const TensorView* tb = f->find("b.bf16");
    QCOMPARE(tb->dtype, DType::BF16);
    QCOMPARE(*toF32(*tb), (std::vector<float>{1.0f, -3.5f, bf16ToF32(f32ToBf16(0.1f))}));
    const TensorView* tc = f->find("c.ids");
    std::vector<int64_t> ids(2);
    std::memcpy(ids.data(), tc->data, 16);
    QCOMPARE(ids, c);
    QVERIFY(!toF32(*tc));  // integers do not convert
    QVERIFY(!f->find("missing"));
  }

  void writerRejectsBadInput() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("bad.safetensors").toStdString();
    std::vector<float> v(5);
    std::vector<TensorToWrite> wrongSize = {{"x", DType::F32, {2, 3}, bytesOf(v)}};
    Status s = writeSafetensors(path, wrongSize);
    QCOMPARE(s.code(), StatusCode::InvalidArgument);
    QVERIFY(mentions(s, {"'x'", "24 bytes", "20 were given"}));
    std::vector<TensorToWrite> repeated = {{"x", DType::F32, {5}, bytesOf(v)},
                                           {"x", DType::F32, {5}, bytesOf(v)}};
    QVERIFY(!writeSafetensors(path, repeated));
    QVERIFY(!QFile::exists(QString::fromStdString(path)));
  }

  // A file laid out by hand, not by our writer: no padding, tensors out of header order.
  void readsHandWrittenFile() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("hand.safetensors").toStdString();
    // F16: 1.0, -2.0, 65504 (largest), 2^-24 (smallest subnormal); BF16: 1.0, 3.140625.
    const std::string data = rawBytes<uint16_t>({0x3F80, 0x4049}) +
                             rawBytes<uint16_t>({0x3C00, 0xC000, 0x7BFF, 0x0001});
    const std::string header =
        R"({"h":{"dtype":"F16","shape":[2,2],"data_offsets":[4,12]},)"
        R"("b":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}})";
    writeRaw(path, header, data);
    Result<SafetensorsFile> f = SafetensorsFile::open(path);
    QVERIFY2(f.isOk(), f.status().toString().c_str());
    QVERIFY(f->metadata().empty());
    QCOMPARE(*toF32(*f->find("h")), (std::vector<float>{1.0f, -2.0f, 65504.0f, std::ldexp(1.0f, -24)}));
    QCOMPARE(*toF32(*f->find("b")), (std::vector<float>{1.0f, 3.140625f}));
  }

  // fromBytes reads a file already in memory, with open()'s checks. An empty tensor converts
  // to no floats (found by fuzz_safetensors under UBSan: toF32 passed an empty vector's null
  // data() to memcpy).
  void readsBytesInMemoryWithEmptyTensors() {
    const std::string header = R"({"e":{"dtype":"F32","shape":[0,3],"data_offsets":[0,0]},)"
                               R"("h":{"dtype":"F16","shape":[0],"data_offsets":[0,0]}})";
    std::string bytes(8, '\0');
    const uint64_t len = header.size();
    std::memcpy(bytes.data(), &len, 8);
    bytes += header;
    Result<SafetensorsFile> f = SafetensorsFile::fromBytes(std::as_bytes(std::span(bytes)), "mem.safetensors");
    QVERIFY2(f.isOk(), f.status().toString().c_str());
    QCOMPARE(f->path().string(), std::string("mem.safetensors"));
    for (const char* name : {"e", "h"}) {
      Result<std::vector<float>> values = toF32(*f->find(name));
      QVERIFY2(values.isOk(), values.status().toString().c_str());
      QVERIFY(values->empty());
    }
    Result<SafetensorsFile> cut = SafetensorsFile::fromBytes(std::as_bytes(std::span(bytes)).first(20), "cut.safetensors");
    QCOMPARE(cut.status().code(), StatusCode::Corrupt);
    QVERIFY(mentions(cut.status(), {"cut.safetensors", "past the end"}));
  }

  // Written by Debian's python3-torch (tests/fixtures/safetensors/make_fixture.py).
  void readsTorchWrittenFixture() {
    Result<SafetensorsFile> f = SafetensorsFile::open(kFixture);
    QVERIFY2(f.isOk(), f.status().toString().c_str());
    QCOMPARE(f->tensors().size(), size_t{5});
    const TensorView* w = f->find("layer.weight");
    QCOMPARE(w->dtype, DType::F32);
    QCOMPARE(w->shape, (std::vector<int64_t>{2, 3}));
    QCOMPARE(*toF32(*w), (std::vector<float>{-0.5f, -0.25f, 0.0f, 0.25f, 0.5f, 0.75f}));
    const TensorView* h = f->find("half.values");
    QCOMPARE(h->dtype, DType::F16);
    QCOMPARE(*toF32(*h), (std::vector<float>{1.0f, -2.5f, 65504.0f, std::ldexp(1.0f, -14),
                                             std::ldexp(1.0f, -24)}));
    const TensorView* b = f->find("bf16.values");
    QCOMPARE(b->dtype, DType::BF16);
    QCOMPARE(b->shape, (std::vector<int64_t>{2, 2}));
    QCOMPARE(*toF32(*b), (std::vector<float>{1.0f, 3.140625f, -0.0078125f, 256.0f}));
    // random.weight starts at data offset 42: an unaligned F32 tensor.
    const TensorView* r = f->find("random.weight");
    std::vector<float> rv = *toF32(*r);
    QCOMPARE(rv.size(), size_t{32});
    QCOMPARE(rv[0], -0.1117185652256012f);
    QCOMPARE(rv[1], -0.49659010767936707f);
    double sum = 0;
    for (float x : rv) sum += x;
    std::string expectedSum;
    for (const auto& [k, v] : f->metadata())
      if (k == "random_sum") expectedSum = v;
    QVERIFY(!expectedSum.empty());
    QVERIFY(std::abs(sum - std::stod(expectedSum)) < 1e-4);
    const TensorView* p = f->find("positions");
    QCOMPARE(p->dtype, DType::I64);
    std::vector<int64_t> pos(3);
    std::memcpy(pos.data(), p->data, 24);
    QCOMPARE(pos, (std::vector<int64_t>{0, 7, -3}));
  }

  void shardedIndex() {
    QTemporaryDir dir;
    const QString d = dir.path();
    std::vector<float> x = {1, 2, 3, 4}, y = {5, 6}, z = {7};
    std::vector<TensorToWrite> first = {{"x", DType::F32, {2, 2}, bytesOf(x)},
                                        {"unlisted", DType::F32, {1}, bytesOf(z)}};
    std::vector<TensorToWrite> second = {{"y", DType::F32, {2}, bytesOf(y)},
                                         {"z", DType::F32, {1}, bytesOf(z)}};
    QVERIFY(writeSafetensors((d + "/model-00001-of-00002.safetensors").toStdString(), first).isOk());
    QVERIFY(writeSafetensors((d + "/model-00002-of-00002.safetensors").toStdString(), second).isOk());
    {
      std::ofstream idx((d + "/model.safetensors.index.json").toStdString(), std::ios::trunc);
      idx << R"({"metadata": {"total_size": 28}, "weight_map": {
        "x": "model-00001-of-00002.safetensors",
        "y": "model-00002-of-00002.safetensors",
        "z": "model-00002-of-00002.safetensors"}})";
    }
    Result<SafetensorsWeights> w = SafetensorsWeights::open(d.toStdString());
    QVERIFY2(w.isOk(), w.status().toString().c_str());
    QCOMPARE(w->size(), size_t{3});
    QCOMPARE(w->files().size(), size_t{2});
    QCOMPARE(w->names(), (std::vector<std::string>{"x", "y", "z"}));
    QCOMPARE(*toF32(*w->find("y")), y);
    QCOMPARE(*toF32(*w->find("z")), z);
    QVERIFY(!w->find("unlisted"));  // only what the index lists
    QVERIFY(w->fileOf("z").string().ends_with("model-00002-of-00002.safetensors"));

    // A copy keeps working after the original is gone (views share the mapping).
    std::optional<SafetensorsWeights> copy;
    {
      SafetensorsWeights tmp = *w;
      copy = tmp;
    }
    QCOMPARE(*toF32(*copy->find("x")), x);

    // The index points a tensor at a shard that lacks it.
    {
      std::ofstream idx((d + "/bad.index.json").toStdString());
      idx << R"({"weight_map": {"y": "model-00001-of-00002.safetensors"}})";
    }
    Result<SafetensorsWeights> bad = SafetensorsWeights::open((d + "/bad.index.json").toStdString());
    QVERIFY(!bad);
    QCOMPARE(bad.status().code(), StatusCode::Corrupt);
    QVERIFY(mentions(bad.status(), {"'y'", "model-00001-of-00002.safetensors"}));

    // A shard that does not exist.
    {
      std::ofstream idx((d + "/missing.index.json").toStdString());
      idx << R"({"weight_map": {"y": "model-00003-of-00003.safetensors"}})";
    }
    Result<SafetensorsWeights> missing =
        SafetensorsWeights::open((d + "/missing.index.json").toStdString());
    QVERIFY(!missing);
    QCOMPARE(missing.status().code(), StatusCode::NotFound);
    QVERIFY(mentions(missing.status(), {"model-00003-of-00003.safetensors", "missing.index.json"}));

    // Shard names must stay inside the model directory.
    {
      std::ofstream idx((d + "/escape.index.json").toStdString());
      idx << R"({"weight_map": {"y": "../elsewhere.safetensors"}})";
    }
    QVERIFY(!SafetensorsWeights::open((d + "/escape.index.json").toStdString()));
  }

  void singleFileThroughWeights() {
    Result<SafetensorsWeights> w = SafetensorsWeights::open(kFixture);
    QVERIFY(w.isOk());
    QCOMPARE(w->size(), size_t{5});
    QVERIFY(w->find("half.values"));
    QTemporaryDir empty;
    Result<SafetensorsWeights> none = SafetensorsWeights::open(empty.path().toStdString());
    QVERIFY(!none);
    QCOMPARE(none.status().code(), StatusCode::NotFound);
  }

  void corruptFiles() {
    QTemporaryDir dir;
    auto path = [&](const char* name) { return dir.filePath(name).toStdString(); };
    const std::string eight = rawBytes<float>({1, 2});  // 8 bytes of data

    {
      std::ofstream(path("short.safetensors")) << "abc";
      Status s = openError(path("short.safetensors"));
      QCOMPARE(s.code(), StatusCode::Corrupt);
      QVERIFY(mentions(s, {"short.safetensors", "too short"}));
    }
    {
      const std::string h = R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
      writeRaw(path("len.safetensors"), h, eight, 1000);
      Status s = openError(path("len.safetensors"));
      QCOMPARE(s.code(), StatusCode::Corrupt);
      QVERIFY(mentions(s, {"len.safetensors", "header length 1000", "past the end"}));
    }
    {
      writeRaw(path("json.safetensors"), R"({"t":{"dtype":)", eight);
      Status s = openError(path("json.safetensors"));
      QCOMPARE(s.code(), StatusCode::Corrupt);
      QVERIFY(mentions(s, {"json.safetensors"}));
    }
    {
      const std::string h = R"({"t":{"dtype":"F8_E4M3","shape":[8],"data_offsets":[0,8]}})";
      writeRaw(path("dtype.safetensors"), h, eight);
      Status s = openError(path("dtype.safetensors"));
      QCOMPARE(s.code(), StatusCode::Corrupt);
      QVERIFY(mentions(s, {"dtype.safetensors", "'t'", "F8_E4M3"}));
    }
    {
      const std::string h = R"({"t":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})";
      writeRaw(path("bounds.safetensors"), h, eight);
      Status s = openError(path("bounds.safetensors"));
      QCOMPARE(s.code(), StatusCode::Corrupt);
      QVERIFY(mentions(s, {"bounds.safetensors", "'t'", "[0, 16)", "8 bytes"}));
    }
    {
      const std::string h = R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})";
      writeRaw(path("reversed.safetensors"), h, eight);
      Status s = openError(path("reversed.safetensors"));
      QCOMPARE(s.code(), StatusCode::Corrupt);
      QVERIFY(mentions(s, {"reversed.safetensors", "'t'"}));
    }
    {
      const std::string h = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                            R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
      writeRaw(path("overlap.safetensors"), h, eight);
      Status s = openError(path("overlap.safetensors"));
      QCOMPARE(s.code(), StatusCode::Corrupt);
      QVERIFY(mentions(s, {"overlap.safetensors", "'a'", "'b'", "overlap"}));
    }
    {
      const std::string h = R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})";
      writeRaw(path("size.safetensors"), h, eight);
      Status s = openError(path("size.safetensors"));
      QCOMPARE(s.code(), StatusCode::Corrupt);
      QVERIFY(mentions(s, {"size.safetensors", "'t'", "[3]", "12 bytes", "span 8"}));
    }
    {
      // A shape whose byte count overflows 64 bits is a size mismatch, not a crash.
      const std::string h =
          R"({"t":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,8]}})";
      writeRaw(path("huge.safetensors"), h, eight);
      Status s = openError(path("huge.safetensors"));
      QCOMPARE(s.code(), StatusCode::Corrupt);
      QVERIFY(mentions(s, {"huge.safetensors", "'t'"}));
    }
    {
      // Found by fuzz_safetensors: an empty tensor whose other dimensions multiply past int64
      // was accepted, and numel() overflowed (undefined behaviour) on it.
      const std::string h = R"({"t":{"dtype":"F32","shape":[4611686018427387904,)"
                            R"(4611686018427387904,0],"data_offsets":[0,0]}})";
      writeRaw(path("numel.safetensors"), h, eight);
      Status s = openError(path("numel.safetensors"));
      QCOMPARE(s.code(), StatusCode::Corrupt);
      QVERIFY(mentions(s, {"numel.safetensors", "'t'", "64-bit"}));
    }
    {
      const std::string h = R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                            R"("t":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
      writeRaw(path("twice.safetensors"), h, eight);
      Status s = openError(path("twice.safetensors"));
      QCOMPARE(s.code(), StatusCode::Corrupt);
      QVERIFY(mentions(s, {"twice.safetensors", "'t'", "twice"}));
    }
    Result<SafetensorsFile> missing = SafetensorsFile::open(path("nope.safetensors"));
    QCOMPARE(missing.status().code(), StatusCode::NotFound);
  }

  void halfConversions() {
    // Every finite half survives half -> float -> half; NaNs stay NaN.
    for (uint32_t h = 0; h < 0x10000; ++h) {
      auto bits = static_cast<uint16_t>(h);
      float f = f16ToF32(bits);
      if (std::isnan(f)) {
        QVERIFY(std::isnan(f16ToF32(f32ToF16(f))));
        continue;
      }
      if (f32ToF16(f) != bits)
        QFAIL(qPrintable(QString("half 0x%1 -> %2 -> 0x%3").arg(h, 4, 16, QChar('0')).arg(f)
                             .arg(f32ToF16(f), 4, 16, QChar('0'))));
    }
    QCOMPARE(f32ToF16(65519.0f), uint16_t{0x7BFF});  // rounds down to the largest half
    QCOMPARE(f32ToF16(65520.0f), uint16_t{0x7C00});  // ties to even: infinity
    QCOMPARE(f32ToF16(1.0f + std::ldexp(1.0f, -11)), uint16_t{0x3C00});  // tie, even stays
    QCOMPARE(f32ToF16(std::ldexp(1.0f, -25)), uint16_t{0x0000});         // tie to even zero
    QCOMPARE(f32ToF16(std::ldexp(1.5f, -25)), uint16_t{0x0001});
    QCOMPARE(f32ToF16(-0.0f), uint16_t{0x8000});
  }

  void bfloatConversions() {
    for (uint32_t b = 0; b < 0x10000; ++b) {
      auto bits = static_cast<uint16_t>(b);
      float f = bf16ToF32(bits);
      if (std::isnan(f)) QVERIFY(std::isnan(bf16ToF32(f32ToBf16(f))));
      else QCOMPARE(f32ToBf16(f), bits);
    }
    // 1 + 2^-8 is halfway between bf16 1.0 and 1.0078125: ties to even keeps 1.0.
    QCOMPARE(f32ToBf16(1.0f + std::ldexp(1.0f, -8)), uint16_t{0x3F80});
    QCOMPARE(f32ToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), uint16_t{0x3F82});
    QCOMPARE(f32ToBf16(3.14159265f), uint16_t{0x4049});
  }
};

QTEST_GUILESS_MAIN(TestSafetensors)
#include "test_safetensors.moc"
