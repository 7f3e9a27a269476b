// The DRAGON wire protocol: length-prefixed binary frames on a TCP stream between the device
// process and the cloud process (our own framing, not gRPC: every message is a few hundred
// bytes sent once per token, so a 32-byte header and hand-written little-endian fields keep
// the per-token cost at one write() and let the transport's delay line hold whole frames;
// Debian's gRPC would add HTTP/2 framing and a code generator for the same few messages).
//
//   Frame = Header (kHeaderBytes, little-endian) + payload (Header::length bytes)
//   Header = magic "DRG1" | version u16 | type u8 | flags u8 | length u32
//            | sentNs u64 (sender's clock when the application sent it)
//            | echoNs u64 (the sentNs of the last frame the sender received; 0: none)
//            | holdUs u32 (how long the sender held that frame before this one)
//
// echoNs gives every frame an in-band round-trip sample: when frame A (sentNs a) reaches the
// peer, the peer's next frame B echoes a; B reaches us at time r, so rtt = r − a − B.holdUs
// (how long the peer held A before sending B). No clocks are compared across processes.
//
//   ByteWriter w; encodeDraft(draft, w); transport.send(MsgType::Draft, w.bytes());
//   RAG_ASSIGN_OR_RETURN(Draft d, decodeDraft(frame.payload));   // Corrupt on a short or bad payload
//
// Documents never travel: a Draft holds a token, a truncated distribution, the side's corrected
// weight W_s and its decode time. Only the two DRCG baselines ship passages, by design: drcg_text
// as text (DocText), drcg_kv as the KV of their prefill (KvChunk frames).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rag/status.h"

namespace rag::dragon {

inline constexpr uint32_t kMagic = 0x31475244;  // "DRG1" read as little-endian u32
inline constexpr uint16_t kProtocolVersion = 2;  // 2: drcg_kv and KvChunk
inline constexpr size_t kHeaderBytes = 32;
inline constexpr uint32_t kMaxPayloadBytes = 64u << 20;  // a larger length is a malformed frame

enum class MsgType : uint8_t {
  Hello = 1,      // device -> cloud: versions, model fingerprint, run settings, the question
  HelloAck,       // cloud -> device: accepted, or why not
  Ready,          // prefill done (both directions)
  Draft,          // a draft token with its local distribution (DRAGON, DRDG/TW)
  Verdict,        // the aggregator's target token and accept/reject of both drafts
  Tokens,         // generated token ids streamed to the device (cloud-only baseline)
  DocText,        // passage texts (DRCG/Text baseline only)
  SeqCandidate,   // a whole generated sequence with per-token scores (DRDG/SW)
  SeqScore,       // the other side's scores of a candidate (DRDG/SW)
  Ping,
  Pong,
  Bye,            // orderly end, with a reason
  Error,          // the peer failed; its message
  KvChunk,        // K/V rows of the cloud's passages' prefill (DRCG/KV baseline only)
};
inline constexpr int kMsgTypeCount = 15;  // indexes 0..14 (0 unused)
std::string_view msgTypeName(MsgType t);

struct FrameHeader {
  uint16_t version = kProtocolVersion;
  MsgType type = MsgType::Ping;
  uint8_t flags = 0;
  uint32_t length = 0;
  uint64_t sentNs = 0;
  uint64_t echoNs = 0;   // sentNs of the last frame the sender had received (0: none yet)
  uint32_t holdUs = 0;   // from the sender's receipt of that frame to this frame's sentNs, µs
};
// magic 4 + version 2 + type 1 + flags 1 + length 4 + sentNs 8 + echoNs 8 + holdUs 4 = 32 bytes.

void encodeHeader(const FrameHeader& h, uint8_t out[kHeaderBytes]);
// Corrupt naming what is wrong (magic, version, unknown type, length over kMaxPayloadBytes).
Result<FrameHeader> decodeHeader(const uint8_t in[kHeaderBytes]);

class ByteWriter {
public:
  void u8(uint8_t v) { m_b.push_back(v); }
  void u16(uint16_t v);
  void u32(uint32_t v);
  void u64(uint64_t v);
  void f32(float v);
  void f64(double v);
  void str(std::string_view s);  // u32 length + bytes
  void raw(std::span<const uint8_t> b);  // the bytes alone (the length is the caller's)
  const std::vector<uint8_t>& bytes() const { return m_b; }

private:
  std::vector<uint8_t> m_b;
};

// Reads fields in order; every read past the end sets an error that status() reports.
class ByteReader {
public:
  explicit ByteReader(std::span<const uint8_t> b, std::string_view what) : m_b(b), m_what(what) {}
  uint8_t u8();
  uint16_t u16();
  uint32_t u32();
  uint64_t u64();
  float f32();
  double f64();
  std::string str();
  std::vector<uint8_t> raw(size_t n);
  bool ok() const { return !m_short; }
  // Corrupt "<what> payload is truncated" or "... has N trailing bytes" when not fully read.
  Status finish() const;

private:
  bool take(size_t n);
  std::span<const uint8_t> m_b;
  size_t m_pos = 0;
  bool m_short = false;
  std::string m_what;
};

// ---- messages ----------------------------------------------------------------------------------

enum class Side : uint8_t { Device = 0, Cloud = 1 };
std::string_view sideName(Side s);
inline Side other(Side s) { return s == Side::Device ? Side::Cloud : Side::Device; }

// Methods of one run (the paper's baselines and DRAGON), chosen by the device.
// Score is no generation: the answer in Hello::answer is teacher-forced and its per-token
// log-probabilities under Hello::scored (dragon, device_only or cloud_only) give a perplexity.
// (DrcgKv comes last so that the older methods keep their wire values.)
enum class Method : uint8_t { Dragon = 0, DrdgTw, DrdgSw, DeviceOnly, CloudOnly, DrcgText, Score, DrcgKv };
std::string_view methodName(Method m);
Result<Method> parseMethod(std::string_view name);  // InvalidArgument listing the names

enum class AggregatorPolicy : uint8_t { Greedy = 0, Device, Cloud, Random };
std::string_view policyName(AggregatorPolicy p);
Result<AggregatorPolicy> parsePolicy(std::string_view name);

struct Hello {
  uint16_t protocolVersion = kProtocolVersion;
  uint64_t modelFingerprint = 0;
  Method method = Method::Dragon;
  AggregatorPolicy policy = AggregatorPolicy::Greedy;
  uint32_t maxTokens = 20;
  uint32_t docsPerSide = 2;
  uint32_t maxAhead = 3;      // drafts a decoder may run ahead of the last target token
  bool ignoreEos = false;     // decode exactly maxTokens (latency benchmarks; vLLM's ignore_eos)
  float temperature = 0;      // 0: greedy
  float topP = 0.8f;          // truncation of the transmitted distributions
  uint64_t seed = 1;
  double latencyMs = 0;       // the link both sides emulate for this run (transport.h)
  double jitterMs = -1;
  double bandwidthMbps = 0;
  std::string question = {};
  Method scored = Method::Dragon;  // Score runs: whose distribution scores the answer
  std::string answer = {};         // Score runs: the answer text to teacher-force
};
struct HelloAck {
  bool accepted = false;
  uint64_t modelFingerprint = 0;
  std::string reason = {};  // why not, when refused
};
struct Ready {
  uint32_t documents = 0;   // how many passages this side retrieved (not which)
  double prefillMs = 0;
  double decodeSlopeMs = 0, decodeInterceptMs = 0;  // the profiler's offline fit d(l) = k·l + b
};

// IEEE half precision (the wire format of log-probabilities): round to nearest even, with
// overflow to ±inf; and back. roundToHalf(x) is the float a half carries for x.
uint16_t floatToHalf(float x);
float halfToFloat(uint16_t h);
inline float roundToHalf(float x) { return halfToFloat(floatToHalf(x)); }

// A sparse log-distribution over token ids: the top-p set of p_s, log-probs renormalised and
// rounded to half precision (what the wire carries: u32 id + f16 log-prob per entry), so the
// side that drafts from it and the side that receives it see the same numbers.
struct SparseDist {
  std::vector<uint32_t> ids = {};  // ascending
  std::vector<float> logp = {};    // same length
  double prob(uint32_t id) const;  // 0 when absent
};

struct Draft {
  Side side = Side::Device;
  uint32_t pos = 0;          // index of the generated token this drafts (0-based)
  uint32_t version = 0;      // the side's rollback count when drafted
  uint32_t token = 0;
  double weight = 0;         // W_s = logsumexp of the side's document scores
  double decodeMs = 0;       // time to compute this draft
  uint32_t contextLen = 0;   // tokens in the side's longest sequence when drafted
  SparseDist dist = {};
};
struct Verdict {
  uint32_t pos = 0;
  uint32_t token = 0;            // the target token y at pos
  bool accepted[2] = {false, false};  // indexed by Side
  Side nextAggregator = Side::Device;
  bool done = false;             // y ends the answer (EOS or the token budget)
};
struct TokenList {
  uint32_t firstPos = 0;
  std::vector<uint32_t> tokens = {};
  bool done = false;
};
struct DocTexts {
  std::vector<std::string> texts;
  std::vector<double> scores;
};
struct SeqCandidate {
  std::vector<uint32_t> tokens;
  double weight = 0;               // W_s
  std::vector<float> logp;         // log p_s(token_i | prefix) per token under the sender's docs
};
struct SeqScore {
  std::vector<float> logp;         // the receiver's candidate scored under the sender's docs
};
struct Bye {
  std::string reason;
};
// A run of K/V rows of one token sequence's prefill (DRCG/KV): tokens [firstToken, firstToken + n)
// of `totalTokens`, computed at RoPE positions firstToken.. by the sender's runner. `data` holds,
// for every layer in order, the keys of the n tokens then their values, each token a row of
// kvHeads × headDim elements of elementBytes (4: F32, 2: BF16) as the KV pool stores them:
//   data.size() = layers × 2 × n × kvHeads × headDim × elementBytes.
// A sequence too large for one frame travels as consecutive chunks (kv_transfer.h); an empty
// sequence (no passages) as one chunk of 0 tokens.
struct KvChunk {
  uint32_t passages = 0;     // how many passages the whole sequence holds
  uint32_t totalTokens = 0;
  uint32_t firstToken = 0;
  uint32_t layers = 0, kvHeads = 0, headDim = 0;
  uint8_t elementBytes = 4;
  std::vector<uint32_t> tokens = {};  // the n token ids of these rows
  std::vector<uint8_t> data = {};
  int64_t rowBytes() const { return static_cast<int64_t>(kvHeads) * headDim * elementBytes; }
};
// Bytes of a KvChunk payload besides its tokens and K/V rows.
inline constexpr size_t kKvChunkFixedBytes = 4 * 8 + 1;  // 6 u32 fields, 2 u32 counts, elementBytes

void encode(const Hello& m, ByteWriter& w);
void encode(const HelloAck& m, ByteWriter& w);
void encode(const Ready& m, ByteWriter& w);
void encode(const Draft& m, ByteWriter& w);
void encode(const Verdict& m, ByteWriter& w);
void encode(const TokenList& m, ByteWriter& w);
void encode(const DocTexts& m, ByteWriter& w);
void encode(const SeqCandidate& m, ByteWriter& w);
void encode(const SeqScore& m, ByteWriter& w);
void encode(const Bye& m, ByteWriter& w);
void encode(const KvChunk& m, ByteWriter& w);

// Each decoder checks ranges (enums, sizes, sorted ids) and reads the payload to its end:
// Corrupt with the message type's name otherwise.
Result<Hello> decodeHello(std::span<const uint8_t> p);
Result<HelloAck> decodeHelloAck(std::span<const uint8_t> p);
Result<Ready> decodeReady(std::span<const uint8_t> p);
Result<Draft> decodeDraft(std::span<const uint8_t> p);
Result<Verdict> decodeVerdict(std::span<const uint8_t> p);
Result<TokenList> decodeTokenList(std::span<const uint8_t> p);
Result<DocTexts> decodeDocTexts(std::span<const uint8_t> p);
Result<SeqCandidate> decodeSeqCandidate(std::span<const uint8_t> p);
Result<SeqScore> decodeSeqScore(std::span<const uint8_t> p);
Result<Bye> decodeBye(std::span<const uint8_t> p);
// Corrupt also for a shape the data length does not match, or an element size other than 2 or 4.
Result<KvChunk> decodeKvChunk(std::span<const uint8_t> p);

}  // namespace rag::dragon
