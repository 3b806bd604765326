// Writes the Hugging Face reference ids and token type ids of text pairs for every
// *.tokenizer.json here, as NAME.pairs.golden.json: {"pairs": [{"a", "b", "ids", "types"}, ...]}.
// The pairs are consecutive lines of corpus.txt (line i with line i+1, the first 120 lines),
// each encoded as one sequence with the post-processor's pair template (encode(a, {text_pair: b}),
// add_special_tokens: true); no truncation, no padding. Pairs with an empty line are left out:
// tokenizers.js takes an empty text_pair for no pair at all (a JavaScript falsy check), where
// Hugging Face's Rust tokenizers encode the pair with an empty second text, as zoo does.
//
// The reference is @huggingface/tokenizers (pure JS), installed outside the repository as for
// gen_hf.mjs:  NODE_PATH=/tmp/hfjs/node_modules node gen_pairs.mjs   (from this folder)
import fs from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(process.env.NODE_PATH ? process.env.NODE_PATH + "/" : import.meta.url);
const { Tokenizer } = require("@huggingface/tokenizers");

const lines = fs.readFileSync("corpus.txt", "utf8").split("\n").slice(0, 121);
const names = process.argv.slice(2).length ? process.argv.slice(2) : fs.readdirSync(".").filter((f) => f.endsWith(".tokenizer.json"));
for (const file of names) {
  const tok = new Tokenizer(JSON.parse(fs.readFileSync(file, "utf8")), {});
  const pairs = [];
  for (let i = 0; i + 1 < lines.length; i++) {
    if (lines[i] === "" || lines[i + 1] === "") continue;
    const e = tok.encode(lines[i], { text_pair: lines[i + 1], return_token_type_ids: true });
    pairs.push({ a: lines[i], b: lines[i + 1], ids: e.ids.map(Number), types: e.token_type_ids.map(Number) });
  }
  const dst = file.replace(/\.tokenizer\.json$/, ".pairs.golden.json");
  fs.writeFileSync(dst, JSON.stringify({ source: "@huggingface/tokenizers (node), encode(a, {text_pair: b})", pairs }) + "\n");
  console.log(dst, pairs.length, "pairs");
}
