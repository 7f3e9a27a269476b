// Talks to `ragraph serve` with the official openai client: node client.mjs BASE_URL QUESTION
// Prints one JSON line with what it received (tests/app/test_http_cli.cpp checks it).
import { readFileSync } from 'node:fs';
import OpenAI from 'openai';

const [baseURL, question] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: 'not-needed', maxRetries: 0, timeout: 120000 });
const messages = [{ role: 'user', content: question }];

const models = await client.models.list();
const plain = await client.chat.completions.create({ model: 'ragraph/oneshot', messages, max_tokens: 12 });

const stream = await client.chat.completions.create({
  model: 'ragraph/oneshot', messages, max_tokens: 12, stream: true, stream_options: { include_usage: true },
});
let content = '';
let contentChunks = 0;
let finish = null;
let extension = null;
let usage = null;
for await (const chunk of stream) {
  if (chunk.usage) usage = chunk.usage;
  const choice = chunk.choices[0];
  if (!choice) continue;
  if (choice.delta?.content) {
    content += choice.delta.content;
    ++contentChunks;
  }
  if (choice.finish_reason) {
    finish = choice.finish_reason;
    extension = chunk.ragraph ?? null;
  }
}

const completion = await client.completions.create({ model: 'ragraph/irg', prompt: question, max_tokens: 4 });

let notFound = null;
try {
  await client.chat.completions.create({ model: 'ragraph/nothing', messages });
} catch (e) {
  notFound = { status: e.status ?? null, code: e.code ?? null, message: e.message };
}

console.log(JSON.stringify({
  openaiVersion: JSON.parse(readFileSync(new URL('./node_modules/openai/package.json', import.meta.url))).version,
  models: models.data.map((m) => m.id),
  plain: {
    content: plain.choices[0].message.content,
    finish: plain.choices[0].finish_reason,
    passages: plain.ragraph?.passages?.length ?? null,
    stages: plain.ragraph?.stages?.map((s) => s.node) ?? null,
  },
  stream: { content, contentChunks, finish, passages: extension?.passages?.length ?? null, usage },
  completion: { text: completion.choices[0].text, stages: completion.ragraph?.stages?.length ?? null },
  notFound,
}));
