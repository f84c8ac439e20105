// ONNX Runtime's outputs for one model and one set of inputs, as raw files:
// the reference export_contrib.py saves for the com.microsoft models.
//   node tests/corpus/ort_reference.js MODEL.onnx INPUTS.json OUT_DIR
// INPUTS.json: [{"name", "dtype", "shape", "file"}] (raw little-endian data);
// OUT_DIR gets output_K.bin and outputs.json ([{"name", "dtype", "shape"}]).
// Needs npm's onnxruntime-node (ONNXRUNTIME_NODE_INSTALL=skip npm install
// onnxruntime-node), by hand: the tests never run it.
const ort = require('onnxruntime-node');
const fs = require('fs');
const path = require('path');

const ctor = {float32: Float32Array, int64: BigInt64Array, int32: Int32Array, uint8: Uint8Array,
              bool: Uint8Array, float64: Float64Array, int8: Int8Array, float16: Uint16Array};

async function main() {
  const [model, inputsPath, outDir] = process.argv.slice(2);
  const session = await ort.InferenceSession.create(model, {graphOptimizationLevel: 'disabled'});
  const feeds = {};
  for (const d of JSON.parse(fs.readFileSync(inputsPath))) {
    const buf = fs.readFileSync(d.file);
    const data = new ctor[d.dtype](buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength));
    feeds[d.name] = new ort.Tensor(d.dtype, data, d.shape);
  }
  const results = await session.run(feeds);
  const outs = [];
  session.outputNames.forEach((name, k) => {
    const t = results[name];
    fs.writeFileSync(path.join(outDir, `output_${k}.bin`), Buffer.from(t.data.buffer, t.data.byteOffset,
                                                                       t.data.byteLength));
    outs.push({name, dtype: t.type, shape: t.dims});
  });
  fs.writeFileSync(path.join(outDir, 'outputs.json'), JSON.stringify(outs));
}

main().catch((e) => { console.error(e.message || e); process.exit(1); });
