// A real client of zoo serve: the official OpenAI Node SDK (npm openai), as an application
// uses it. Run by TestServeOpenAISDK with NODE_PATH at the package's node_modules:
//   node openai_client.cjs BASE_URL API_KEY MODEL TEXTS_JSON
// It prints one JSON object: the embeddings of client.embeddings.create with no
// encoding_format (the SDK asks for base64 and decodes it), with "float", with dimensions 8,
// the ids of client.models.list(), client.models.retrieve(MODEL)'s id, the error status a
// wrong key gets, and the round trip of each call in milliseconds.
const OpenAI = require("openai");

async function main() {
  const [baseURL, apiKey, model, textsJSON] = process.argv.slice(2);
  const input = JSON.parse(textsJSON);
  const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60000 });
  const out = { ms: {} };
  const timed = async (name, fn) => {
    const t0 = performance.now();
    const r = await fn();
    out.ms[name] = performance.now() - t0;
    return r;
  };
  const asDefault = await timed("default", () => client.embeddings.create({ model, input }));
  out.default = asDefault.data.map((d) => Array.from(d.embedding));
  out.usage = asDefault.usage;
  out.model = asDefault.model;
  const asFloat = await timed("float", () => client.embeddings.create({ model, input, encoding_format: "float" }));
  out.float = asFloat.data.map((d) => d.embedding);
  const cut = await timed("dimensions", () => client.embeddings.create({ model, input, dimensions: 8, encoding_format: "float" }));
  out.dimensions = cut.data.map((d) => d.embedding);
  const models = [];
  for await (const m of client.models.list()) models.push(m.id);
  out.models = models;
  out.retrieved = (await client.models.retrieve(model)).id;
  try {
    await new OpenAI({ baseURL, apiKey: "wrong", maxRetries: 0 }).embeddings.create({ model, input });
    out.wrongKey = "accepted";
  } catch (e) {
    out.wrongKey = e.status + " " + e.constructor.name;
  }
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error(e.stack || String(e));
  process.exit(1);
});
