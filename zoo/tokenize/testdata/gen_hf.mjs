// Writes the Hugging Face reference ids for every *.tokenizer.json here, on corpus.txt, as
// NAME.hf.golden.json: {"lines": [{"ids": [...], "tokens": [...]}, ...], "whole": {"ids", "tokens"}}.
// Each line is encoded alone and the whole file as one sequence, with the post-processor's special
// tokens (add_special_tokens: true, as encode does by default); no truncation, no padding.
//
// The reference is @huggingface/tokenizers (pure JS, not written here). Install it outside the repo:
//   mkdir -p /tmp/hfjs && cd /tmp/hfjs && npm init -y && npm install @huggingface/tokenizers
// then run:  NODE_PATH=/tmp/hfjs/node_modules node gen_hf.mjs   (from this folder)
import fs from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(process.env.NODE_PATH ? process.env.NODE_PATH + "/" : import.meta.url);
const { Tokenizer } = require("@huggingface/tokenizers");

const corpus = fs.readFileSync("corpus.txt", "utf8");
const lines = corpus.split("\n");
if (lines[lines.length - 1] === "") lines.pop();
const names = process.argv.slice(2).length ? process.argv.slice(2) : fs.readdirSync(".").filter((f) => f.endsWith(".tokenizer.json"));
for (const file of names) {
  const tok = new Tokenizer(JSON.parse(fs.readFileSync(file, "utf8")), {});
  const enc = (s) => {
    const e = tok.encode(s);
    return { ids: e.ids.map(Number), tokens: e.tokens };
  };
  const out = { source: "@huggingface/tokenizers (node) on corpus.txt", lines: lines.map(enc), whole: enc(corpus) };
  const dst = file.replace(/\.tokenizer\.json$/, ".hf.golden.json");
  fs.writeFileSync(dst, JSON.stringify(out) + "\n");
  console.log(dst, out.whole.ids.length, "ids");
}
