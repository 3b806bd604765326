// Runs ONNX's node tests (written by gen.py) under ONNX Runtime, through the npm package
// onnxruntime-node, and compares each output as ONNX's runner does (onnx.backend.test.runner:
// the same element type and shape, floats within rtol 1e-3 and atol 1e-7 with NaN equal to NaN,
// integers, booleans and strings exactly). It prints one line per test, tab-separated: name,
// outcome (pass, refused, wrong) and detail, for comparison with zoo's own report
// (ZOO_NODETESTS_REPORT in onnx/nodetests_test.go):
//
//   NODE_PATH=/tmp/ortnpm/node_modules node onnx/testdata/nodetests/ort.js DIR [ZOO.tsv] > ort.tsv
//
// Given zoo's report (ZOO_NODETESTS_REPORT), which names each test's operator and subset, it
// also prints the counts for the encoder subset and the whole suite to stderr, beside zoo's.
//
// where DIR is the directory gen.py wrote and /tmp/ortnpm holds onnxruntime-node 1.30.0
// (ONNXRUNTIME_NODE_INSTALL=skip npm install onnxruntime-node@1.30.0). It is a measuring tool,
// not a test: CI does not run it.
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');
ort.env.logLevel = 'error';

// A minimal protobuf reader for onnx.TensorProto.
function readVarint(buf, pos) {
  let v = 0n, shift = 0n;
  for (;;) {
    const b = buf[pos.i++];
    v |= BigInt(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
    shift += 7n;
  }
}

const TYPES = { // ONNX data_type → [onnxruntime-node type, typed array, bytes per element]
  1: ['float32', Float32Array, 4], 2: ['uint8', Uint8Array, 1], 3: ['int8', Int8Array, 1],
  4: ['uint16', Uint16Array, 2], 5: ['int16', Int16Array, 2], 6: ['int32', Int32Array, 4],
  7: ['int64', BigInt64Array, 8], 8: ['string', null, 0], 9: ['bool', Uint8Array, 1],
  10: ['float16', Uint16Array, 2], 11: ['float64', Float64Array, 8], 12: ['uint32', Uint32Array, 4],
  13: ['uint64', BigUint64Array, 8], 16: ['bfloat16', Uint16Array, 2],
};

function decodeTensor(buf) {
  const t = { dims: [], type: 0, floats: [], int32s: [], strings: [], int64s: [], raw: null, doubles: [], uint64s: [] };
  const pos = { i: 0 };
  while (pos.i < buf.length) {
    const key = Number(readVarint(buf, pos));
    const field = key >> 3, wire = key & 7;
    const packed = (list, read) => {
      if (wire === 2) {
        const len = Number(readVarint(buf, pos)), end = pos.i + len;
        while (pos.i < end) list.push(read());
      } else list.push(read());
    };
    const varint = () => readVarint(buf, pos);
    const f32 = () => { const v = buf.readFloatLE(pos.i); pos.i += 4; return v; };
    const f64 = () => { const v = buf.readDoubleLE(pos.i); pos.i += 8; return v; };
    switch (field) {
      case 1: packed(t.dims, varint); break;
      case 2: t.type = Number(varint()); break;
      case 4: packed(t.floats, f32); break;
      case 5: packed(t.int32s, varint); break;
      case 6: { const len = Number(varint()); t.strings.push(buf.subarray(pos.i, pos.i + len).toString('utf8')); pos.i += len; break; }
      case 7: packed(t.int64s, varint); break;
      case 9: { const len = Number(varint()); t.raw = buf.subarray(pos.i, pos.i + len); pos.i += len; break; }
      case 10: packed(t.doubles, f64); break;
      case 11: packed(t.uint64s, varint); break;
      default: // skip
        if (wire === 0) varint();
        else if (wire === 1) pos.i += 8;
        else if (wire === 2) { const len = Number(varint()); pos.i += len; }
        else if (wire === 5) pos.i += 4;
        else throw new Error('bad wire type ' + wire);
    }
  }
  const dims = t.dims.map(Number);
  const n = dims.reduce((a, b) => a * b, 1);
  const info = TYPES[t.type];
  if (!info) throw new Error('data type ' + t.type);
  const [name, Arr, size] = info;
  let data;
  if (name === 'string') data = t.strings;
  else if (t.raw && t.raw.length) {
    const ab = new ArrayBuffer(t.raw.length); // aligned, as typed arrays need
    new Uint8Array(ab).set(t.raw);
    data = new Arr(ab, 0, n);
  } else {
    data = new Arr(n);
    const src = t.type === 1 ? t.floats : t.type === 11 ? t.doubles : t.type === 7 ? t.int64s : t.type === 13 ? t.uint64s : t.int32s;
    for (let k = 0; k < n; k++) {
      const v = src[k];
      if (Arr === BigInt64Array) data[k] = BigInt.asIntN(64, BigInt(v));
      else if (Arr === BigUint64Array) data[k] = BigInt.asUintN(64, BigInt(v));
      else if (typeof v === 'bigint') data[k] = Number(BigInt.asIntN(32, v));
      else data[k] = v;
    }
  }
  return { type: name, dims, data };
}

function half(h) { // float16 bits → number
  const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

function values(type, data) {
  if (type === 'float16') return Array.from(data, half);
  return Array.from(data);
}

function compare(got, want) {
  if (got.type !== want.type) return `type ${got.type}, want ${want.type}`;
  const gd = got.dims.map(Number), wd = want.dims.map(Number);
  if (gd.join(',') !== wd.join(',')) return `shape [${gd}], want [${wd}]`;
  const g = values(got.type, got.data), w = values(want.type, want.data);
  const float = ['float32', 'float64', 'float16'].includes(want.type);
  for (let k = 0; k < w.length; k++) {
    if (float) {
      const a = g[k], b = w[k];
      if (Number.isNaN(a) || Number.isNaN(b)) { if (Number.isNaN(a) && Number.isNaN(b)) continue; }
      else if (!Number.isFinite(a) || !Number.isFinite(b)) { if (a === b) continue; }
      else if (Math.abs(a - b) <= 1e-7 + 1e-3 * Math.abs(b)) continue;
      return `element ${k}: ${a}, want ${b}`;
    }
    if (g[k] !== w[k] && !(want.type === 'bool' && Boolean(g[k]) === Boolean(w[k]))) return `element ${k}: ${g[k]}, want ${w[k]}`;
  }
  return null;
}

async function runTest(dir) {
  let sess;
  try {
    sess = await ort.InferenceSession.create(path.join(dir, 'model.onnx'), { intraOpNumThreads: 1, interOpNumThreads: 1, logSeverityLevel: 3 });
  } catch (e) { return ['refused', String(e.message || e).split('\n')[0]]; }
  const sets = fs.readdirSync(dir).filter((f) => f.startsWith('test_data_set_')).sort();
  for (const set of sets) {
    const feeds = {};
    const sdir = path.join(dir, set);
    for (let k = 0; k < sess.inputNames.length; k++) {
      const f = path.join(sdir, `input_${k}.pb`);
      if (!fs.existsSync(f)) continue;
      let t;
      try { t = decodeTensor(fs.readFileSync(f)); } catch (e) { return ['refused', 'input is not a tensor (sequence or optional): not fed here']; }
      try {
        feeds[sess.inputNames[k]] = new ort.Tensor(t.type === 'bool' ? 'bool' : t.type, t.data, t.dims);
      } catch (e) { return ['refused', 'input: ' + String(e.message || e).split('\n')[0]]; }
    }
    let out;
    try { out = await sess.run(feeds); } catch (e) { return ['refused', String(e.message || e).split('\n')[0]]; }
    for (let k = 0; k < sess.outputNames.length; k++) {
      let want;
      try { want = decodeTensor(fs.readFileSync(path.join(sdir, `output_${k}.pb`))); } catch (e) {
        return ['refused', `${set}: output ${sess.outputNames[k]} is not a tensor (sequence or optional): not compared here`];
      }
      const g = out[sess.outputNames[k]];
      const err = compare({ type: g.type, dims: g.dims, data: g.data }, want);
      if (err) return ['wrong', `${set}: output ${sess.outputNames[k]}: ${err}`];
    }
  }
  return ['pass', ''];
}

(async () => {
  const root = path.join(process.argv[2], 'node');
  const ortStatus = {};
  for (const name of fs.readdirSync(root).sort()) {
    const [status, detail] = await runTest(path.join(root, name));
    ortStatus[name] = status;
    process.stdout.write(`${name}\t${status}\t${detail.replace(/[\t\n]/g, ' ')}\n`);
  }
  if (process.argv[3]) {
    const count = () => ({ tests: 0, pass: 0, refused: 0, bad: 0 });
    const c = { zoo: { encoder: count(), all: count() }, ort: { encoder: count(), all: count() } };
    const add = (k, s) => { k.tests++; if (s === 'pass') k.pass++; else if (s === 'refused') k.refused++; else k.bad++; };
    for (const line of fs.readFileSync(process.argv[3], 'utf8').split('\n')) {
      const [name, , subset, status] = line.split('\t');
      if (!name || !(name in ortStatus)) continue;
      for (const [who, s] of [['zoo', status], ['ort', ortStatus[name]]]) {
        add(c[who].all, s);
        if (subset === 'encoder') add(c[who].encoder, s);
      }
    }
    for (const who of ['zoo', 'ort']) {
      for (const part of ['encoder', 'all']) {
        const k = c[who][part];
        process.stderr.write(`${who === 'zoo' ? 'zoo' : 'ONNX Runtime'} ${part === 'encoder' ? 'encoder subset' : 'whole suite'}: ${k.tests} tests, ${k.pass} pass, ${k.refused} refused, ${k.bad} wrong\n`);
      }
    }
  }
})();
