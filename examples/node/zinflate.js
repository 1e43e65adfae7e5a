// zinflate leaks zlib inflate streams in Node.js, whose zlib is built into
// the node binary: `node zinflate.js [leaked] [closed]` creates `leaked`
// streams with zlib.createInflate(), writes one deflate buffer into each
// (node initialises zlib lazily, at the first write: the state inside
// inflateInit2_, the window inside inflate()) and keeps them referenced,
// never ended; and `closed` streams it ends and closes, which hold
// nothing. It exits once every write has been inflated, without ending
// the leaked streams (process.reallyExit: no environment cleanup).
'use strict';
const zlib = require('zlib');

const leaked = Number(process.argv[2] || 100);
const closed = Number(process.argv[3] || 20);
const input = zlib.deflateSync(Buffer.alloc(64 << 10, 'leakscope '));
const kept = [];

function leak(done) {
  const s = zlib.createInflate();
  s.on('data', () => {});
  s.write(input, done);
  kept.push(s);
}

function close(done) {
  const s = zlib.createInflate();
  s.on('data', () => {});
  s.on('close', done);
  s.end(input);
}

let pending = leaked + closed;
function done() {
  if (--pending === 0) {
    console.log(`zinflate: ${kept.length} streams leaked, ${closed} closed`);
    process.reallyExit(0);
  }
}
for (let i = 0; i < leaked; i++) leak(done);
for (let i = 0; i < closed; i++) close(done);
